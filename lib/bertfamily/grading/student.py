"""The student version of an exercise notebook (``make student``), and putting the solutions back.

Cell tag convention (cell metadata ``tags``), read from the solution notebook:

``solution`` on a **code** cell
    The cell is the reference answer. In the student version its code is replaced by a placeholder:
    the comment lines at the top of the cell (the instruction) are kept, then one line
    ``NAME = None  # YOUR CODE HERE`` for each *answer* the checks read, so that an unanswered task
    reaches its check as ``None`` and gets a hint, not a ``NameError``. The answers are the names in
    the cell's metadata ``"answers"`` (a list) if present, otherwise every name assigned at the top
    level of the cell. A cell that assigns nothing becomes ``# YOUR CODE HERE``.
``solution`` on a **markdown** cell
    Dropped from the student version: the sphinx-exercise solution markup and any prose that
    explains the answer. The generator refuses a source where a markdown cell that is *not* tagged
    ``solution`` contains a ``{solution`` directive, so an answer cannot leak by a forgotten tag.
``check`` on a code cell
    A call into :mod:`bertfamily.checks`; kept as it is, and locked in Jupyter (not editable, not
    deletable): the grader restores it from the course's copy anyway.
``solutions-note`` on a markdown cell
    Prose that tells the reader where the solutions are (the website's dropdowns): dropped from the
    student version and from the solution-free website, which have none.

Every other cell is kept; outputs and execution counts are cleared, widget state is dropped, and cell
ids are kept (so :func:`restore_solutions` can put the reference answers back, cell by cell). The
website's ``{exercise}`` boxes become plain Markdown (a heading per task and its text), which Jupyter
and Colab show as they are; ``student_version(nb, website=True)`` keeps them, for the page of the
solution-free website (``make book-public``, ``tools/public_book.py``).
``write_student`` never writes to SOURCE, and refuses to overwrite an
existing DEST whose content differs unless ``force`` is given.
"""

from __future__ import annotations

import ast
import copy
import os
import re
from pathlib import Path

import nbformat

SOLUTION, CHECK, SOLUTIONS_NOTE = "solution", "check", "solutions-note"
PLACEHOLDER = "# YOUR CODE HERE"
_SOLUTION_DIRECTIVE = re.compile(r"[`:]{3,}\s*\{solution")


def cell_tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []))


def targets_of(node) -> list:
    """What an assignment binds (``a = b = 1``: both; ``x: int = 1``, ``x += 1``: x); [] for any other node."""
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []


def answers(cell) -> list[str]:
    """The names a solution code cell must leave defined: metadata ``answers`` or its top-level assignments."""
    listed = cell.get("metadata", {}).get("answers")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(n, str) and n.isidentifier() for n in listed):
            raise ValueError(
                f"cell {cell.get('id')}: metadata 'answers' must be a list of variable names, got {listed!r}"
            )
        return list(listed)
    try:
        tree = ast.parse(cell.source)
    except SyntaxError as exc:
        raise ValueError(f"solution cell {cell.get('id')} is not valid Python: {exc}") from exc
    names = []
    for node in tree.body:
        targets = targets_of(node)
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.append(sub.id)
    return names


def placeholder(cell) -> str:
    """The student's version of a solution code cell (see the module docstring)."""
    lines = cell.source.splitlines()
    head = []
    for line in lines:
        if line.strip().startswith("#"):
            head.append(line)
        else:
            break
    body = [f"{name} = None  {PLACEHOLDER}" for name in answers(cell)] or [PLACEHOLDER]
    return "\n".join(head + body)


_EXERCISE_BOX = re.compile(
    r"^(?P<fence>[`:]{3,})\s*\{exercise\}\s*(?P<title>.*?)\s*\n(?P<body>.*?)^(?P=fence)\s*$", re.M | re.S
)


_BIBLIOGRAPHY = re.compile(r"^(?P<fence>[`:]{3,})\s*\{bibliography\}.*?^(?P=fence)\s*$\n?", re.M | re.S)
_CITE = re.compile(r"\{cite(?::\w+)?\}`([^`]+)`")


def _plain_exercise(source: str, number: int, points: dict | None = None) -> tuple[str, int]:
    """The website's MyST as plain Markdown, which Jupyter and Colab show as they are: each
    ``{exercise}`` box a heading ("Task N: title") and its text, citations as (key), the
    bibliography directive a pointer to the website; returns the number of the last task so far."""

    def heading(found):
        nonlocal number
        number += 1
        body = "\n".join(line for line in found.group("body").splitlines() if not re.match(r"^:\w[\w-]*:", line))
        worth = f" ({points[number]})" if points and number in points else ""  # as the lecturer set them
        return f"### Task {number}: {found.group('title')}{worth}\n\n{body.strip()}\n"

    source = _EXERCISE_BOX.sub(heading, source)
    source = _BIBLIOGRAPHY.sub("(The references are listed on the course's website.)\n", source)
    source = _CITE.sub(lambda m: "(" + ", ".join(k.strip() for k in m.group(1).split(",")) + ")", source)
    return source.rstrip("\n"), number


def student_version(nb, website: bool = False, points: dict | None = None):
    """A new notebook: solutions replaced by placeholders, solution markdown dropped, outputs cleared;
    with ``website``, the MyST of the ``{exercise}`` boxes is kept (for the solution-free website);
    ``points`` (task number -> "2 points") is shown in each task's heading; its 0, where given (the deadline and
    what late work costs), under the first Markdown cell's text."""
    out = copy.deepcopy(nb)
    cells, number = [], 0
    terms = (points or {}).get(0)
    for index, cell in enumerate(out.cells):
        solution = SOLUTION in cell_tags(cell)
        if cell.cell_type == "markdown":
            if solution or SOLUTIONS_NOTE in cell_tags(cell):
                continue
            if _SOLUTION_DIRECTIVE.search(cell.source):
                raise ValueError(
                    f"markdown cell {index} (id {cell.get('id')}) holds a solution "
                    f"directive but is not tagged {SOLUTION!r}: tag it, or the answer "
                    "would reach the student version"
                )
        if cell.cell_type == "markdown" and not website:
            cell.source, number = _plain_exercise(cell.source, number, points)
            if terms:
                cell.source, terms = f"{cell.source}\n\n**{terms}**", None
        if cell.cell_type == "code":
            if solution:
                cell.source = placeholder(cell)
                cell.metadata.pop("answers", None)
            else:  # the course's code (checks, imports): locked in Jupyter; the grader restores it anyway
                cell.metadata["editable"] = False
                cell.metadata["deletable"] = False
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
        if "tags" in cell.metadata:
            kept = [t for t in cell.metadata["tags"] if t != SOLUTION]
            if kept:
                cell.metadata["tags"] = kept
            else:
                del cell.metadata["tags"]
        cells.append(cell)
    out.cells = cells
    out.metadata.pop("widgets", None)
    return out


def restore_solutions(student_nb, solution_nb):
    """A copy of ``student_nb`` with every solution code cell put back from ``solution_nb`` (by cell id)."""
    reference = {c.get("id"): c for c in solution_nb.cells if c.cell_type == "code" and SOLUTION in cell_tags(c)}
    out = copy.deepcopy(student_nb)
    for cell in out.cells:
        if cell.get("id") in reference:
            cell.source = reference[cell.get("id")].source
    return out


def model_answer(reference):
    """What an honest student hands in: the student version with the reference's answers put back and
    the reference's outputs (the same code, so the same outputs), by cell id."""
    by_id = {c.get("id"): c for c in reference.cells}
    out = restore_solutions(student_version(reference), reference)
    for cell in out.cells:
        if cell.cell_type == "code" and cell.get("id") in by_id:
            cell.outputs = copy.deepcopy(by_id[cell.id].outputs)
            cell.execution_count = by_id[cell.id].execution_count
    return out


def _text(nb) -> str:
    return nbformat.writes(nb) + "\n"


def write_student(source, dest, force: bool = False, points: dict | None = None) -> str:
    """Write the student version of ``source`` to ``dest``; return ``"written"`` or ``"unchanged"``.

    Raises ValueError when ``dest`` is ``source``, or when ``dest`` exists with other content and
    ``force`` is false.
    """
    source, dest = Path(source), Path(dest)
    if not source.is_file():
        raise ValueError(f"no notebook at {source}")
    if dest.resolve() == source.resolve():
        raise ValueError(f"DEST is the solution notebook itself ({source}): choose another path")
    nb = nbformat.read(source, as_version=4)
    text = _text(student_version(nb, points=points))
    if dest.exists():
        if dest.read_text(encoding="utf-8") == text:
            return "unchanged"
        if not force:
            raise ValueError(
                f"{dest} exists and differs from the student version of {source}; pass --force to overwrite it"
            )
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, dest)
    return "written"
