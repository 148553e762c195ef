"""Round 10 of the red team (a helper attacking the sealed grader with the course's real exercise). Its two
forged 9/9s are tested where they were fixed: the reference with its local names renamed in
tests/test_copies.py, the sizes of a ``zipfile`` archive of random bytes in tests/test_redteam_round9.py
(``trees.saved``). Here, on the grader's reading of the code (no kernel runs):

- F3: IPython's shell reached through ``exit._ip`` (or ``quit._ip``), its ``ast_transformers`` rewriting the
  exporter line of every later cell to read a dict of the student's: said;
- F4: honest Colab habits said "read by hand" in every row: ``import gc; gc.collect()`` after freeing a model,
  ``!ls -lh {workdir}`` after saving. Not said now; any other use of ``gc``, or a shell line that chains,
  substitutes or evaluates more than a name, still is.
"""

import pytest
from grading_helpers import with_cell

from bertfamily import grading
from bertfamily.grading import integrity

SWAP = """
import ast
class Swap(ast.NodeTransformer):
    def visit_Name(self, node):
        return ast.copy_location(ast.Name(id="mine", ctx=node.ctx), node) if node.id == "f" else node
mine = {}
exit._ip.ast_transformers.append(Swap())
"""


def _said(exercise, source) -> str:
    return " ".join(integrity.suspicious(with_cell(grading.student_version(exercise.reference), source), exercise))


@pytest.mark.parametrize(
    "source, said",
    [
        (SWAP, "uses .ast_transformers"),
        (SWAP, "uses ._ip"),
        ("shell = quit._ip\nshell.input_transformers_post.append(str.upper)", "uses .input_transformers_post"),
        ("import gc\nobjects = gc.get_objects()", "uses gc (reach any object of the interpreter)"),
        ("import gc\nlook = gc\nlook.collect()", "uses gc"),
        ("import gc\ngetattr(gc, 'get_' + 'objects')()", "uses gc"),
        ("import gc as g\ng.get_referrers(print)", "uses g (reach any object of the interpreter)"),
        ("from gc import get_objects\nget_objects()", "imports gc"),
        ("workdir = '.'\nget_ipython().system('ls {workdir}; rm -rf {workdir}')", "runs a shell command (!)"),
        ("get_ipython().system('ls {__import__(\"os\").getcwd()}')", "runs a shell command (!)"),
        ("get_ipython().system('ls $(whoami)')", "runs a shell command (!)"),
        ("get_ipython().system('cat /etc/passwd')", "runs a shell command (!)"),
        ("get_ipython().system('ls > listing.txt')", "runs a shell command (!)"),
    ],
)
def test_the_shell_and_gc_used_for_more_than_looking_are_said(exercise, source, said):
    assert said in _said(exercise, source)


def test_honest_colab_habits_are_not_said(exercise):
    """The round's honest notebook: gc.collect() after freeing models, a look at the saved files."""
    honest = (
        "import gc\n"
        "bert = None\n"
        "gc.collect()\n"
        "from gc import collect\n"
        "collect()\n"
        "workdir = '.'\n"
        "get_ipython().system('ls -lh {workdir}')\n"
        "get_ipython().system('du -sh {workdir}')\n"
        "get_ipython().system('nvidia-smi')\n"
        "get_ipython().system('pip install -q transformers')\n"
    )
    assert _said(exercise, honest) == ""
