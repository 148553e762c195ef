"""What a student of the exercise may import: the same where they work and where the grader runs.

The exercise asks the student to count, predict and measure with transformers, torch and the standard
library. Two modules of the course would answer its tasks instead (:data:`REFUSED`): the parameter
budget (tasks 2, 4, 7) and the quantised-size predictor (tasks 6, 7, 9, 10). Neither is in the
grader's sandbox (its copy of the course holds modules of those names that only raise
:func:`refusal`'s ``ImportError``), and in a notebook that imports :mod:`bertfamily.checks` the same
import from the student's code raises the same error (:func:`install_guard`): the self-check and the
grader refuse them in the same words, so what passes where the student works passes when graded.

This module imports nothing of the course: the sandbox's copy keeps it.
"""

from __future__ import annotations

import builtins
import sys

#: The course's calculators of the exercise's answers, and the tasks each would answer.
REFUSED = {
    "bertfamily.budget": "counts parameters and predicts sizes: tasks 2, 4 and 7",
    "bertfamily.quantization": "predicts quantised file sizes: tasks 6, 7, 9 and 10",
}
#: What the exercise's code may use (the handout says the same).
ALLOWED = "transformers, torch, the standard library and bertfamily.checks (and the course's other modules)"


def refusal(module: str) -> str:
    """The one message, in the student's notebook and in the grader, for importing ``module``."""
    return (
        f"{module} is the course's own calculator ({REFUSED[module]}), so the exercise does not "
        f"allow it, here or when graded: compute the answer in your own code with {ALLOWED}"
    )


def refused(name: str, fromlist=()) -> str | None:
    """The refused module an ``import`` statement reaches (``import bertfamily.budget``, ``from
    bertfamily.budget import count``, ``from bertfamily import budget``), or None."""
    for module in REFUSED:
        if name == module or name.startswith(module + "."):
            return module
        package, _, leaf = module.rpartition(".")
        if name in (package, "bertfamily.checks") and leaf in (fromlist or ()):  # checks holds them too
            return module
    return None


_ORIGINAL = builtins.__import__
_SHELL = []  # the kernel's shell, found once when the guard is installed (never looked up in an import)


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 (import's own names)
    if level == 0 and _SHELL and globals is not None and globals is getattr(_SHELL[0], "user_ns", None):
        module = refused(name, fromlist)
        if module is not None:
            raise ImportError(refusal(module), name=module)
    return _ORIGINAL(name, globals, locals, fromlist, level)


def install_guard() -> bool:
    """In a Jupyter kernel, make the notebook's own imports of :data:`REFUSED` raise :func:`refusal`'s
    error, as they do when graded (the course's modules keep importing them). True where installed
    (a kernel), False elsewhere (a script, the tests, the grader)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is None or getattr(shell, "user_ns", None) is None:
        return False
    _SHELL[:] = [shell]
    if builtins.__import__ is not _guarded_import:
        builtins.__import__ = _guarded_import
    return True


def kernel_stub(module: str) -> str:
    """The source of the sandbox's module ``module``: it raises :func:`refusal`'s error when imported."""
    return (
        f'"""{module} is not part of the exercise: see bertfamily.exercise_rules."""\n'
        "from bertfamily.exercise_rules import refusal\n\n"
        f"raise ImportError(refusal({module!r}), name={module!r})\n"
    )
