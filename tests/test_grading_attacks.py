"""The second attacker's kinds, read and measured without a kernel (fast: no sandbox run).

Each kind is checked on the grader's own parts with notebooks and files of that kind, in variants
(test_grading_kinds.py grades a planted class end to end):

- answers typed inside wrappers (``max(42, 0)``, a helper variable, a function that returns a literal);
- code in places the reader did not read: ``%config`` lines, ``{expr}`` in any magic's line, a module
  the run writes and imports;
- sizes that are not measurements: a sparse file made by ``truncate``, a file of zeros;
- bytes held by a mapping of a deleted file, which neither a name nor a descriptor holds;
- file names that are not UTF-8, notebooks with a byte-order mark or Windows line ends.
"""

import ast
import ctypes
import json
import mmap
import os

import nbformat
import pytest
from grading_class import EXERCISE, TINY, tiny

from bertfamily import grading
from bertfamily.grading import causes, integrity, literals, magics, monitor, nbval_worker, trees
from bertfamily.grading.classroom import collect
from bertfamily.grading.gradebook import write_feedback, write_gradebook


def literal(source: str, name: str = "x") -> bool:
    return name in literals.literal_names([ast.parse(source)])


@pytest.mark.parametrize(
    "source",
    [
        "x = 42",
        "x = max(42, 0)",
        "x = int(max(84.0, 0))",
        "x = sorted([42, 1])[-1]",
        "a = 41\nx = a + 1",
        "a = 66362879 + 1\nb = a\nx = b",
        "def f():\n    return 41\nx = f() + 1",
        "f = lambda: 42\nx = f()",
        "import math\nx = math.prod([6, 7])",
        "x = int('4' + '2')",
        "x = {'a': 42}['a']",
        "x = 40\nx += 2",
        "x = len('a' * 42)",
        "x = 42 if True else 0",
        "x, y = 42, 84",
    ],
)
def test_an_answer_made_of_literals_is_typed_whatever_wraps_it(source):
    assert literal(source), source


@pytest.mark.parametrize(
    "source",
    [
        "x = sum(p.numel() for p in model.parameters())",
        "x = 0\nfor p in model.parameters():\n    x += p.numel()",
        "import os\nx = os.path.getsize(path)",
        "x = counts['bert'] // 2",
        "x = model.float()",
        "def max(*a):\n    return os.getpid()\nx = max(1, 2)",
        "def f(m):\n    return m.n\nx = f(model)",
        "with open(p) as f:\n    x = f",
        "x = 42\nx = len(data)",
    ],
)
def test_a_computed_answer_is_not_typed(source):
    assert not literal(source), source


@pytest.mark.parametrize(
    "source",
    ["x = int(max(66362880.0, 0))", "a = 66362879 + 1", "def f():\n    return 33181440 * 2", "x = float('66362880')"],
)
def test_a_number_the_checks_expect_is_seen_however_it_is_written(source):
    found = integrity._findings(ast.parse(source), {}, {66362880})
    assert any("holds the number 66362880" in f for f in found), (source, found)


def test_the_real_exercises_solution_types_nothing_and_is_not_flagged():
    ex = grading.Exercise.load(EXERCISE)
    nb = grading.model_answer(ex.reference)
    from bertfamily.grading.channel import read_names

    names = {n for t in ex.graded for _, s in t.checks for n in read_names(s)}
    assert causes.typed_answers(nb, ex, names) == {} and integrity.suspicious(nb, ex) == []


@pytest.mark.parametrize(
    "source, seen",
    [
        ("%config A.b = (globals().update(x=42), 1)[1]", "globals"),
        ("%pwd {__import__('__main__').__dict__.update(y=84)}", "__import__"),
        ("%env A={os.system('ls')}", "os.system"),
        ("%%capture {exec('x = 1')}\nprint(1)", "exec"),
        ("%matplotlib {get_ipython().run_cell('x = 42')}", "get_ipython"),
    ],
)
def test_code_in_a_magics_line_is_read(source, seen):
    tree, unread = magics.read_cell(source)
    code = "\n".join(ast.unparse(n) for n in tree.body)
    assert seen in code.split("run_line_magic")[-1] or seen in code.split("run_cell_magic")[-1], code
    assert integrity._findings(tree, {"os": "os"}, set()), code


def test_a_magics_line_that_cannot_be_read_is_said_and_a_dict_in_timeit_is_code():
    assert magics.read_cell("%cd {x")[1] == ["%cd"]
    assert magics.read_cell("%timeit d = {1: 2}")[1] == []
    assert magics.read_cell("%matplotlib inline")[1] == []


@pytest.mark.parametrize(
    "source, said",
    [
        ("open('helper.py', 'w').write(src)\nimport helper", "not installed"),
        ("from . import helper", "relative import"),
        ("open('helper.py', 'w').write(src)", "names a Python file"),
        ("open('/home/sandbox/.local/lib/python3.11/site-packages/x.pth', 'w').write(src)", "names a Python file"),
        ("import site\nopen(site.getusersitepackages() + '/x.pth', 'w')", "imports site"),
        ("torch.save(model.state_dict(), f'{workdir}/distilbert_fp32.pth')", None),  # PyTorch's name for weights
        ("torch.save(model, 'composite_model.pth')", None),
        ("import numpy, json, bertfamily", None),
    ],
)
def test_a_module_the_run_writes_is_said(source, said):
    found = integrity._findings(ast.parse(source), {}, set())
    assert (said is None and found == []) or any(said in f for f in found), found


def test_only_files_whose_bytes_were_written_are_measured(tmp_path):
    size = 3 * 2**20 + 17
    (tmp_path / "model.pt").write_bytes(os.urandom(size))
    with open(tmp_path / "sparse.pt", "wb") as f:
        f.truncate(size + 1)  # a size typed into truncate: nothing written
    (tmp_path / "zeros.pt").write_bytes(bytes(size + 2))
    (tmp_path / "note.txt").write_text("42")
    deep = tmp_path
    for _ in range(70):  # deeper than the walk goes: the files above are still seen
        deep = deep / "d"
    os.makedirs(deep)
    sizes, unsaved = nbval_worker.file_sizes([str(tmp_path)])
    assert unsaved == {size}  # random bytes: no saved model (trees.saved)
    assert size in sizes and 2 in sizes and size + 1 not in sizes and size + 2 not in sizes, sizes
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        assert trees.written("model.pt", os.stat(tmp_path / "model.pt"), folder)
    finally:
        os.close(folder)


def test_a_mapped_file_deleted_after_closing_still_counts(tmp_path):
    path = tmp_path / "held"
    path.write_bytes(os.urandom(4 * 2**20))
    libc = ctypes.CDLL(None)
    libc.mmap.restype, libc.mmap.argtypes = (
        ctypes.c_void_p,
        [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long],
    )
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    address = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)  # one page of 4 MiB
    os.close(fd)
    path.unlink()
    try:
        held = monitor._mapped_deleted(os.getpid(), set(), {os.stat(tmp_path).st_dev})
        assert held >= 4 * 2**20, held
    finally:
        libc.munmap(address, mmap.PAGESIZE)
    assert monitor._mapped_deleted(os.getpid(), set(), {os.stat(tmp_path).st_dev}) == 0


def test_a_file_name_that_is_not_utf8_gets_its_row_and_feedback(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    name = os.fsdecode(b"bob\xff.ipynb")
    (klass / name).write_bytes(TINY.read_bytes())
    ((path, shown),) = collect([klass])
    assert path.name == name and shown.endswith("bob\\xff.ipynb")
    ex = tiny()
    rows = [grading.Row(shown, "graded", 4, 4, {}, ""), grading.Row(str(path), "graded", 4, 4, {}, "")]
    write_gradebook(rows, ex, tmp_path / "g.csv")
    assert "bob\\xff.ipynb" in (tmp_path / "g.csv").read_text(encoding="utf-8")
    assert len(write_feedback(rows, ex, tmp_path / "feedback")) == 2


def test_a_byte_order_mark_and_windows_line_ends_are_read_as_jupyter_shows_them():
    ex = tiny()
    content = json.loads(nbformat.writes(ex.reference))
    for cell in content["cells"]:
        cell["source"] = "".join(cell["source"]).replace("\n", "\r\n")
    data = b"\xef\xbb\xbf" + json.dumps(content).encode()
    nb = grading.read_submission(data, ex.tasks, ex.name, [])
    prepared = grading.prepare(nb, ex)
    assert not any("edited" in what or "changed" in what for _, what in prepared.notes), prepared.notes


def test_data_the_courses_cells_give_is_not_a_literal_even_in_a_changed_course_cell():
    from bertfamily.grading.channel import read_names

    ex = tiny()
    nb = grading.model_answer(ex.reference)
    setup = next(c for c in nb.cells if c.get("id") == "setup")
    setup.source = setup.source.replace("import os\n", "import os, math\n")  # the course's cell, changed
    names = {n for t in ex.graded for _, s in t.checks for n in read_names(s)}
    assert causes.typed_answers(nb, ex, names) == {}
    typed = next(c for c in nb.cells if c.get("id") == "s1")
    typed.source = "x = max(42, 0)\nnote = 'typed'"
    found = causes.typed_answers(nb, ex, names)  # y = 2 * x: a literal too
    assert found["x"] == nb.cells.index(typed) and set(found) == {"x", "y"}, found


def test_a_notebook_with_ids_on_some_cells_only_has_the_others_matched_by_their_code():
    """nbformat 4.4 saved with ids on the check cells only: the course's set-up cell, without its id,
    is still the course's (not flagged as the student's, not run twice)."""
    ex = tiny()
    content = json.loads(nbformat.writes(grading.model_answer(ex.reference)))
    content["nbformat_minor"] = 4
    checks = {cid for t in ex.tasks for cid, _ in t.checks}
    for cell in content["cells"]:
        if cell.get("id") not in checks:
            cell.pop("id", None)
    nb = grading.read_submission(json.dumps(content).encode(), ex.tasks, ex.name, [])
    prepared = grading.prepare(nb, ex)
    ids = [c.get("id") for c in prepared.nb.cells]
    assert ids.count("setup") == 1 and "setup-course" not in ids, ids
    assert integrity.suspicious(prepared.nb, ex) == [], integrity.suspicious(prepared.nb, ex)


@pytest.mark.slow  # starts a kernel in the sandbox
@pytest.mark.skipif(grading.sandbox.sandbox_problem() is not None, reason="no sandbox here")
def test_an_honest_notebook_whose_name_is_not_utf8_keeps_its_marks(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    nbformat.write(grading.model_answer(tiny().reference), klass / os.fsdecode(b"bob\xff.ipynb"))
    (row,) = grading.grade_class([klass], tiny(), grading.Limits(cell_timeout=120, timeout=300), progress=False)
    assert (row.status, row.score) == ("graded", 4) and row.submission.endswith("bob\\xff.ipynb"), row
