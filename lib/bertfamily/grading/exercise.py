"""The exercise a class is graded on, reading a submission, and the copy of it that runs.

:func:`prepare` repairs accidents before the run, and says what it repaired: cells matched by their
code when an editor dropped the ids; check cells (and the course's other code cells) restored from
the reference, or put back where they were deleted; nbval's markers taken from the reference only.
"""
from __future__ import annotations

import copy
import json
import re
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import nbformat.v4

from bertfamily.grading.student import CHECK, SOLUTION, _tags

ROOT = Path(__file__).resolve().parents[3]
#: The course's solution notebook: it defines the tasks (and is graded like any submission).
REFERENCE = ROOT / "book" / "exercise_distilbert.ipynb"
MAX_NOTEBOOK_BYTES = 50 * 2**20
#: nbval's cell tags and comment markers: the grader, not the submission, decides which outputs count.
NBVAL_TAGS = {"nbval-ignore-output", "nbval-check-output", "nbval-raises-exception", "raises-exception",
              "nbval-skip", "pytest-validate-ignore-output"}
def _without_nbval_markers(source: str) -> str:
    """``source`` without the comment lines nbval reads as markers, found as nbval finds them (a line
    that, stripped, starts with ``#`` and whose comment, ``#``s and spaces stripped, is a marker)."""
    from nbval.plugin import comment_markers

    return "\n".join(line for line in source.split("\n") if not (
        line.strip().startswith("#") and (line.strip().lstrip("#").strip() in comment_markers
                                          or line.strip().lstrip("#").strip().startswith("NBVAL_"))))
_EXERCISE = re.compile(r"^[`:]{3,}\s*\{exercise\}\s*(.*?)\s*$", re.M)


class Invalid(ValueError):
    """A submission that cannot be graded: not a readable notebook, or not this exercise."""


@dataclass(frozen=True)
class Task:
    """One task of the exercise: the ids of its solution and check code cells, as the reference has them."""
    name: str
    title: str
    cells: tuple
    checks: tuple  # (cell id, source) of each check cell
    graded: bool


def _lines(source: str) -> tuple:
    """A cell's code, compared as a reader sees it: lines without trailing spaces, no blank lines."""
    return tuple(line.rstrip() for line in source.splitlines() if line.strip())


@dataclass(frozen=True)
class Exercise:
    """The exercise a class is graded on: its reference (solution) notebook and its tasks."""
    name: str
    reference: nbformat.NotebookNode
    tasks: tuple

    @classmethod
    def load(cls, path=REFERENCE) -> "Exercise":
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"no reference notebook at {path}: pass --reference SOLUTION.ipynb")
        reference = nbformat.read(path, as_version=4)
        return cls(path.name, reference, tuple(exercise_tasks(reference)))

    @property
    def graded(self) -> list[Task]:
        return [t for t in self.tasks if t.graded]


def exercise_tasks(reference) -> list[Task]:
    """The tasks of an exercise notebook: one per ``{exercise}`` directive, in order (``task1``, ...).

    A task holds the code cells tagged ``solution`` or ``check`` that follow its directive. A task
    whose check cells are all tagged ``nbval-ignore-output`` (a timing: its verdict depends on the
    machine) is not graded, and its cells are not run.
    """
    groups = []
    for cell in reference.cells:
        found = _EXERCISE.search(cell.source) if cell.cell_type == "markdown" else None
        if found:
            groups.append((found.group(1), [], []))
        elif cell.cell_type == "code" and ({SOLUTION, CHECK} & set(_tags(cell))):
            if not groups:
                raise ValueError(f"code cell {cell.get('id')} is tagged {_tags(cell)} before any "
                                 "{exercise} directive of the reference notebook")
            if not cell.get("id"):
                raise ValueError("the reference notebook's cells have no ids (nbformat 4.5 or later)")
            groups[-1][1].append(cell.id)
            if CHECK in _tags(cell):
                groups[-1][2].append(cell)
    tasks = []
    for number, (title, cells, checks) in enumerate(groups, 1):
        if not checks:
            raise ValueError(f"exercise {number} ({title}) of the reference notebook has no check cell")
        graded = not all("nbval-ignore-output" in _tags(c) for c in checks)
        tasks.append(Task(f"task{number}", title, tuple(cells), tuple((c.id, c.source) for c in checks),
                          graded))
    if not tasks:
        raise ValueError("the reference notebook has no {exercise} directive with check cells")
    return tasks


def read_submission(data: bytes, tasks, reference_name: str = "the exercise"):
    """The notebook in ``data``, or :class:`Invalid` saying why it cannot be graded.

    It is this exercise when one of its check cells is in it, by cell id or (a notebook saved by an
    editor that drops ids) by its code.
    """
    if not data.strip():
        raise Invalid("empty file")
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise Invalid(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB: not a notebook of {reference_name}")
    try:
        content = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise Invalid("not a notebook: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise Invalid(f"not a notebook: invalid JSON ({exc})") from None
    except RecursionError:
        raise Invalid("not a notebook: JSON nested too deeply") from None
    if not isinstance(content, dict) or content.get("nbformat") != 4:
        raise Invalid("not a notebook: JSON without 'nbformat': 4 (Jupyter notebooks since 2015 have it)")
    try:
        with warnings.catch_warnings():  # nbformat warns about what it would fix; only errors count
            warnings.simplefilter("ignore")
            nbformat.validate(content)  # the schema of the file as it is
        nb = nbformat.v4.to_notebook_json(content)  # sources and texts joined, as nbformat.read does
    except Exception as exc:  # nbformat raises several kinds; any of them means "cannot read this"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Invalid(f"not a valid notebook: {first}") from None
    ids = {c.get("id") for c in nb.cells}
    checks = {cid: _lines(source) for t in tasks for cid, source in t.checks}
    by_source = {_lines(c.source) for c in nb.cells if c.cell_type == "code"} & set(checks.values())
    if not ids & set(checks) and not by_source:
        raise Invalid(f"not this exercise: none of the {len(checks)} check cells of {reference_name} "
                      "is in it (by cell id, which Jupyter keeps, or by its code)")
    return nb


@dataclass
class Prepared:
    """The copy of a submission that runs, and what was repaired on the way (for the gradebook)."""
    nb: nbformat.NotebookNode
    notes: list  # (task name or None, what was repaired), in the order of the notebook


def _only_added(student: str, reference: str) -> bool:
    """True when ``student`` holds every line of ``reference``, in order (the student only added lines)."""
    want, have = list(_lines(reference)), iter(_lines(student))
    return all(any(line == got for got in have) for line in want)


def _match_by_source(cells, reference) -> int:
    """Give cells without a known id the id of the reference code cell with the same code (in order);
    the number matched. Solution cells are matched by what follows them (see ``_owners``)."""
    known = {c.get("id") for c in reference.cells}
    free = [c for c in reference.cells if c.cell_type == "code" and SOLUTION not in _tags(c)]
    matched = 0
    for cell in cells:
        if cell.cell_type != "code" or cell.get("id") in known:
            continue
        found = next((r for r in free if _lines(r.source) == _lines(cell.source)), None)
        if found is not None:
            cell["id"] = found.id
            free.remove(found)
            matched += 1
    return matched


def prepare(nb, exercise) -> Prepared:
    """The copy that runs (the submission itself is never changed), with what was repaired.

    * A notebook saved without cell ids (nbformat 4.4 editors) has its cells matched by code.
    * Check cells are restored from the reference by id, and put back where they were deleted: an
      edit cannot change a verdict, a stray keystroke costs nothing. Their outputs are compared by the
      grader (its own run of the check), not by nbval.
    * The course's other code cells (imports, set-up) keep what the student wrote: when the student
      changed more than adding lines, the course's version runs first, just before it, so that a line
      the student lost is still there and a line the student added (``import os, math``) still counts.
      Deleted ones are put back.
    * An ungraded task (the timing stretch) has its check skipped; its other cells run, with their
      outputs not compared and their errors not counted, so a helper it defines exists for later tasks.
    * nbval's tags and ``# NBVAL_...`` comment lines come from the reference only (a submission
      cannot exempt a cell from the comparison).
    """
    reference, tasks = exercise.reference, exercise.tasks
    task_of = {cid: t.name for t in tasks for cid in t.cells}
    course = {c.id: c for c in reference.cells if c.cell_type == "code" and SOLUTION not in _tags(c)}
    checks = {cid for t in tasks for cid, _ in t.checks}
    skipped = {cid for t in tasks if not t.graded for cid, _ in t.checks}
    tolerated = {cid for t in tasks if not t.graded for cid in t.cells} - skipped
    out, notes = copy.deepcopy(nb), []
    out.nbformat, out.nbformat_minor = 4, max(5, out.get("nbformat_minor", 5))
    known = {c.get("id") for c in reference.cells}
    if not any(c.get("id") in known for c in out.cells):
        matched = _match_by_source(out.cells, reference)
        notes.append((None, f"the notebook has no cell ids (saved by an older editor): {matched} of the course's "
                            "cells were recognised by their code"))
    seen = set()
    for index, cell in enumerate(out.cells):
        if not cell.get("id") or cell.get("id") in seen:  # a duplicated id would confuse the owners
            cell["id"] = uuid.uuid4().hex[:8]
        seen.add(cell["id"])
        ref = course.get(cell["id"])
        if ref is not None and cell.cell_type != "code":  # Jupyter's M or R key on a course cell
            out.cells[index] = copy.deepcopy(ref)
            out.cells[index].outputs, out.cells[index].execution_count = [], None
            what = "its check cell" if ref.id in checks else "a cell of the course"
            notes.append((task_of.get(ref.id), f"{what} (cell {index}) had become a {cell.cell_type} cell; "
                                               "the course's code cell was put back and run"))
    # put back the course's cells that were deleted, after the reference cell before them
    present = {c.get("id"): i for i, c in enumerate(out.cells)}
    where = 0
    for ref in reference.cells:
        if ref.id in present:
            where = out.cells.index(next(c for c in out.cells if c.get("id") == ref.id)) + 1
        elif ref.id in course and ref.id not in skipped:
            restored = copy.deepcopy(ref)
            restored.outputs, restored.execution_count = [], None
            out.cells.insert(where, restored)
            where += 1
            what = "its check cell" if ref.id in checks else "a cell of the course"
            notes.append((task_of.get(ref.id), f"{what} was deleted; the course's copy was put back and run"))
    cells, inserted = [], {}
    for index, cell in enumerate(out.cells):
        ref = course.get(cell.get("id")) if cell.cell_type == "code" else None
        if ref is not None and cell.source != ref.source and ref.id not in skipped:
            if ref.id in checks:
                notes.append((task_of.get(ref.id), f"its check cell (cell {index}) was edited; the course's "
                                                   "check was restored and run"))
                cell.source = ref.source
            elif not _only_added(cell.source, ref.source):
                notes.append((task_of.get(ref.id), f"the course's cell {index} was changed; the course's version "
                                                   "ran just before it, then the student's"))
                first = nbformat.v4.new_code_cell(ref.source, id=f"{ref.id}-course")
                inserted[first.id] = ref
                cells.append(first)
        cells.append(cell)
    out.cells = cells
    for cell in out.cells:
        if cell.cell_type != "code":
            continue
        tags = [t for t in _tags(cell) if t not in NBVAL_TAGS]
        if cell.get("id") in known:
            tags += [t for t in _tags(next(c for c in reference.cells if c.id == cell.get("id"))) if t in NBVAL_TAGS]
        if cell.get("id") in skipped:
            tags.append("nbval-skip")
        elif cell.get("id") in checks or cell.get("id") in inserted:
            tags.append("nbval-ignore-output")  # the grader compares a check's output itself
        elif cell.get("id") in tolerated:
            tags += ["nbval-ignore-output", "raises-exception"]
        cell.source = _without_nbval_markers(cell.source)
        if tags:
            cell.metadata["tags"] = list(dict.fromkeys(tags))
        else:
            cell.metadata.pop("tags", None)
    return Prepared(out, notes)
