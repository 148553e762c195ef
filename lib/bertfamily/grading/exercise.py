"""The exercise a class is graded on: its reference (solution) notebook and its tasks.

The grader knows no course folder: the reference is a path its caller gives (``--reference``; the
course's is ``book/exercise_distilbert.ipynb``). A submission is read and prepared against it in
:mod:`bertfamily.grading.submission`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from bertfamily.grading.student import CHECK, PLACEHOLDER, SOLUTION, cell_tags

_EXERCISE = re.compile(r"^[`:]{3,}\s*\{exercise\}\s*(.*?)\s*$", re.M)


@dataclass(frozen=True)
class Task:
    """One task of the exercise: the ids of its solution and check code cells, as the reference has them."""

    name: str
    title: str
    cells: tuple
    checks: tuple  # (cell id, source) of each check cell
    graded: bool


def visible_lines(source: str) -> tuple:
    """A cell's code, compared as a reader sees it: lines without trailing spaces, no blank lines."""
    return tuple(line.rstrip() for line in source.splitlines() if line.strip())


@dataclass(frozen=True)
class Exercise:
    """The exercise a class is graded on: its reference (solution) notebook and its tasks."""

    name: str
    reference: nbformat.NotebookNode
    tasks: tuple
    #: The folder the reference was read from: no run's sandbox mounts a folder that holds it
    #: (:func:`~bertfamily.grading.mounts.python_roots`). None: built in memory.
    folder: Path | None = field(default=None, compare=False)

    @classmethod
    def load(cls, path: str | Path) -> Exercise:
        """The exercise whose solution notebook is at ``path`` (its tasks: :func:`exercise_tasks`)."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"no reference notebook at {path}: pass --reference SOLUTION.ipynb")
        reference = nbformat.read(path, as_version=4)
        if not any(SOLUTION in cell_tags(c) for c in reference.cells) and PLACEHOLDER in nbformat.writes(reference):
            raise ValueError(
                f"{path} is a student version (its solutions are {PLACEHOLDER!r}; the handout, or a student's "
                "notebook): give the solution notebook as --reference (the course's is book/exercise_distilbert.ipynb)"
            )
        return cls(path.name, reference, tuple(exercise_tasks(reference)), path.resolve().parent)

    @property
    def graded(self) -> list[Task]:
        return [t for t in self.tasks if t.graded]


def exercise_tasks(reference) -> list[Task]:
    """The tasks of an exercise notebook: one per ``{exercise}`` directive, in order (``task1``, ...).

    A task holds the code cells tagged ``solution`` or ``check`` that follow its directive. A task
    whose check cells are all tagged ``nbval-ignore-output`` (a timing: its verdict depends on the
    machine) is not graded, and its check cells are not run (its other cells are).
    """
    groups: list[tuple[str, list, list]] = []  # (title, its cell ids, its check cells) per directive
    for cell in reference.cells:
        found = _EXERCISE.search(cell.source) if cell.cell_type == "markdown" else None
        if found:
            groups.append((found.group(1), [], []))
        elif cell.cell_type == "code" and ({SOLUTION, CHECK} & set(cell_tags(cell))):
            if not groups:
                raise ValueError(
                    f"code cell {cell.get('id')} is tagged {cell_tags(cell)} before any "
                    "{exercise} directive of the reference notebook"
                )
            if not cell.get("id"):
                raise ValueError("the reference notebook's cells have no ids (nbformat 4.5 or later)")
            groups[-1][1].append(cell.id)
            if CHECK in cell_tags(cell):
                groups[-1][2].append(cell)
    tasks = []
    for number, (title, cells, checks) in enumerate(groups, 1):
        if not checks:
            raise ValueError(f"exercise {number} ({title}) of the reference notebook has no check cell")
        graded = not all("nbval-ignore-output" in cell_tags(c) for c in checks)
        tasks.append(Task(f"task{number}", title, tuple(cells), tuple((c.id, c.source) for c in checks), graded))
    if not tasks:
        raise ValueError("the reference notebook has no {exercise} directive with check cells")
    return tasks


def solution_trees(cells):
    """(cell, its parsed code) for each solution cell among ``cells`` (code cells tagged
    :data:`~bertfamily.grading.student.SOLUTION`) that parses."""
    for cell in cells:
        if cell is None or cell.cell_type != "code" or SOLUTION not in cell_tags(cell):
            continue
        try:
            yield cell, ast.parse(cell.source)
        except SyntaxError:
            continue


def check_statements(source: str) -> list[tuple[str, str]]:
    """A check cell's statements, each as (the check it calls, ``check_reduction``, or "" for a statement
    that calls none, such as ``for_the_instructor``; its source)."""
    tree = ast.parse(source)
    found = []
    for node in tree.body:
        calls = [
            n.func.attr
            for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.startswith("check_")
        ]
        found.append((calls[0] if calls else "", ast.get_source_segment(source, node) or ""))
    return found
