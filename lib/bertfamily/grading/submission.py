"""One submitted file before its run: read (repaired first, then validated), recognised as this
exercise, and prepared into the copy that runs.

:func:`prepare` repairs accidents before the run, and says what it repaired: cells matched by their
code when an editor dropped the ids; check cells (and the course's other code cells) restored from
the reference, or put back where they were deleted; nbval's markers taken from the reference only.
"""

from __future__ import annotations

import copy
import json
import os
import re
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import nbformat.v4

from bertfamily.grading.exercise import visible_lines
from bertfamily.grading.safeio import ZIP_MAGIC, from_zip
from bertfamily.grading.student import SOLUTION, cell_tags

MAX_NOTEBOOK_BYTES = 50 * 2**20
#: Cells and stored outputs a notebook may hold (the exercise: about 60 cells; a student's scratch cells
#: and outputs: hundreds). Under the byte cap a notebook can hold a million empty ones, each validated,
#: repaired, copied and written by the grader before the run's limits start: minutes of its time.
MAX_CELLS, MAX_OUTPUTS = 10_000, 20_000
#: nbval's cell tags and comment markers: the grader, not the submission, decides which outputs count.
NBVAL_TAGS = {
    "nbval-ignore-output",
    "nbval-check-output",
    "nbval-raises-exception",
    "raises-exception",
    "nbval-skip",
    "pytest-validate-ignore-output",
}


def _without_nbval_markers(source: str) -> str:
    """``source`` without the comment lines nbval reads as markers, found as nbval finds them: the lines of
    ``str.splitlines`` (which also ends a line at ``\\f``, ``\\x1e``, ``\\u2028`` and the like, inside a
    Python comment as anywhere: a marker hidden there is a marker to nbval) that, stripped, start with ``#``
    and whose comment, ``#``s and spaces stripped, is a marker. Every other line keeps its own line end."""
    from nbval.plugin import comment_markers

    pieces = _LINE_ENDS.split(source)  # line, its end, line, its end, ..., the last line
    kept = []
    for line, end in zip(pieces[::2], [*pieces[1::2], ""], strict=True):
        comment = line.strip().lstrip("#").strip() if line.strip().startswith("#") else None
        if comment is None or not (comment in comment_markers or comment.startswith("NBVAL_")):
            kept.append(line + end)
    return "".join(kept)


#: What ends a line for ``str.splitlines`` (and so for nbval's markers), captured to keep each line's own end.
_LINE_ENDS = re.compile("(\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029])")


class Invalid(ValueError):
    """A submission that cannot be graded: not a readable notebook, or not this exercise."""


def link_problem(path) -> str | None:
    """Why a path is not graded when it is a symbolic link, or lies in a linked folder (None: it is not)."""
    path = Path(path)
    for part in [path, *path.parents]:
        if part.is_symlink():
            target = os.readlink(part)
            where = "it is" if part == path else f"its folder {part} is"
            return (
                f"not graded: {where} a symbolic link (to {target}); hand in the notebook itself "
                "(a link can point at the reference solution or at a classmate's file)"
            )
    return None


#: The keys nbformat 4's schema allows in each kind of output and cell.
_OUTPUT_KEYS = {
    "stream": {"output_type", "name", "text"},
    "display_data": {"output_type", "data", "metadata"},
    "execute_result": {"output_type", "data", "metadata", "execution_count"},
    "error": {"output_type", "ename", "evalue", "traceback"},
}
_CELL_KEYS = {
    "code": {"id", "cell_type", "metadata", "source", "outputs", "execution_count"},
    "markdown": {"id", "cell_type", "metadata", "source", "attachments"},
    "raw": {"id", "cell_type", "metadata", "source", "attachments"},
}
_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")


def repair_notebook(content: dict) -> list[str]:
    """Repair, in place, what editors write that Jupyter opens but nbformat's schema refuses; what was
    repaired, in words. Outputs keep only their schema's keys (older VS Code saved the ``transient``
    key of the kernel's message); a notebook of nbformat 4.0-4.4 that keeps cell ids (jupytext, older
    nbconvert and papermill) is read as 4.5; ids that are missing, malformed or repeated get new ones;
    a cell's missing ``metadata``, ``outputs`` or ``execution_count`` are added, foreign keys dropped."""
    said: dict[str, int] = {}

    def note(what):
        said[what] = said.get(what, 0) + 1

    cells = content.get("cells")
    if not isinstance(cells, list):
        return []
    if not isinstance(content.get("metadata"), dict):
        content["metadata"] = {}
        note("the notebook's metadata")
    minor = content.get("nbformat_minor")
    has_ids = any(isinstance(c, dict) and "id" in c for c in cells)
    if isinstance(minor, int) and minor < 5 and has_ids:
        content["nbformat_minor"] = 5
        note(f"cell ids kept by an nbformat 4.{minor} notebook (read as 4.5)")
    seen = set()
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") not in _CELL_KEYS:
            continue
        kind = cell["cell_type"]
        for key in sorted(set(cell) - _CELL_KEYS[kind]):
            del cell[key]
            note(f"a `{key}` key on a {kind} cell")
        if not isinstance(cell.get("metadata"), dict):
            cell["metadata"] = {}
            note("a cell without metadata")
        if content.get("nbformat_minor", 0) >= 5 and (
            not isinstance(cell.get("id"), str) or not _ID.match(cell["id"]) or cell["id"] in seen
        ):
            cell["id"] = uuid.uuid4().hex[:8]
            note("a cell id missing, malformed or repeated")
        seen.add(cell.get("id"))
        if kind != "code":
            continue
        if not isinstance(cell.get("outputs"), list):
            cell["outputs"] = []
            note("a code cell without outputs")
        if "execution_count" not in cell or not (
            cell["execution_count"] is None
            or (
                isinstance(cell["execution_count"], int)
                and not isinstance(cell["execution_count"], bool)
                and cell["execution_count"] >= 0
            )
        ):
            cell["execution_count"] = None
            note("a code cell without a valid execution count")
        for out in cell["outputs"]:
            allowed = _OUTPUT_KEYS.get(str(out.get("output_type"))) if isinstance(out, dict) else None
            for key in sorted(set(out) - allowed) if allowed else ():
                del out[key]
                note(f"a `{key}` key in an output")
    return [f"{what} ({n} times)" if n > 1 else what for what, n in said.items()]


def printable(text) -> str:
    """Text (or a path) that UTF-8 can write: the bytes of a file name that were not UTF-8 (a zip of
    Latin-1 names; ``surrogateescape``) as ``\\xff``, for the gradebook, the feedback and the kernel."""
    text = os.fspath(text)
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate of another kind
        data = text.encode("utf-8", "surrogatepass")
    return data.decode("utf-8", "backslashreplace")


def read_submission(data: bytes, tasks, reference_name: str = "the exercise", repairs: list | None = None):
    """The notebook in ``data``, or :class:`Invalid` saying why it cannot be graded.

    It is this exercise when one of its check cells is in it, by cell id or (a notebook saved by an
    editor that drops ids) by its code. What Jupyter opens is repaired first (:func:`repair_notebook`;
    said in ``repairs``), then validated.
    """
    if data[:4] == ZIP_MAGIC:  # the notebook zipped (Windows' "Send to > Compressed folder", a size limit)
        try:
            data, member = from_zip(data, MAX_NOTEBOOK_BYTES)
        except ValueError as exc:
            raise Invalid(f"{exc}: hand in the notebook itself (.ipynb), one") from None
        if repairs is not None:
            repairs.append(f"handed in as a .zip: its one notebook, {printable(member)!r}, was graded")
    if not data.strip():
        raise Invalid("empty file")
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise Invalid(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB: not a notebook of {reference_name}")
    try:
        content = json.loads(data.decode("utf-8-sig"))  # a byte-order mark some Windows editors write
    except UnicodeDecodeError:
        raise Invalid("not a notebook: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise Invalid(f"not a notebook: invalid JSON ({exc})") from None
    except RecursionError:
        raise Invalid("not a notebook: JSON nested too deeply") from None
    if not isinstance(content, dict) or content.get("nbformat") != 4:
        raise Invalid("not a notebook: JSON without 'nbformat': 4 (Jupyter notebooks since 2015 have it)")
    found = content.get("cells")
    cells: list = found if isinstance(found, list) else []
    outputs = sum(len(c["outputs"]) for c in cells if isinstance(c, dict) and isinstance(c.get("outputs"), list))
    if len(cells) > MAX_CELLS or outputs > MAX_OUTPUTS:
        what = f"{len(cells):,} cells" if len(cells) > MAX_CELLS else f"{outputs:,} outputs"
        raise Invalid(
            f"not a notebook of {reference_name}: {what}, more than the grader reads ({MAX_CELLS:,} cells "
            f"and {MAX_OUTPUTS:,} stored outputs): clear the outputs or delete the extra cells, then save"
        )
    try:  # a lone surrogate ("\\udfff" in the JSON): no editor saves one, and no copy of it can be written
        json.dumps(content, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Invalid(
            f"not a notebook: its JSON escapes a lone surrogate ({exc.object[exc.start]!a}), which no "
            "UTF-8 text holds: save it again from Jupyter"
        ) from None
    for cell in content.get("cells") or []:  # Windows line ends: the same code as Jupyter shows it
        source = cell.get("source") if isinstance(cell, dict) else None
        if isinstance(source, str) or (isinstance(source, list) and all(isinstance(x, str) for x in source)):
            text = source if isinstance(source, str) else "".join(source)
            if "\r" in text:
                cell["source"] = text.replace("\r\n", "\n").replace("\r", "\n")
    fixed = repair_notebook(content)
    if fixed and repairs is not None:
        repairs.append("repaired before grading (the notebook opens in Jupyter as it is): " + ", ".join(fixed))
    try:
        with warnings.catch_warnings():  # nbformat warns about what it would fix; only errors count
            warnings.simplefilter("ignore")
            nbformat.validate(content)  # the schema of the file as it is
        nb = nbformat.v4.to_notebook_json(content)  # sources and texts joined, as nbformat.read does
    except Exception as exc:  # nbformat raises several kinds; any of them means "cannot read this"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Invalid(f"not a valid notebook: {first}") from None
    ids = {c.get("id") for c in nb.cells}
    checks = {cid: visible_lines(source) for t in tasks for cid, source in t.checks}
    by_source = {visible_lines(c.source) for c in nb.cells if c.cell_type == "code"} & set(checks.values())
    if not ids & set(checks) and not by_source:
        raise Invalid(
            f"not this exercise: none of the {len(checks)} check cells of {reference_name} "
            "is in it (by cell id, which Jupyter keeps, or by its code)"
        )
    return nb


@dataclass
class Prepared:
    """The copy of a submission that runs, and what was repaired on the way (for the gradebook)."""

    nb: nbformat.NotebookNode
    notes: list  # (task name or None, what was repaired), in the order of the notebook


def _only_added(student: str, reference: str) -> bool:
    """True when ``student`` holds every line of ``reference``, in order (the student only added lines)."""
    want, have = list(visible_lines(reference)), iter(visible_lines(student))
    return all(any(line == got for got in have) for line in want)


def _match_by_source(cells, reference) -> int:
    """Give code cells without a course id (none, or one an editor made up) the id of the reference
    code cell with the same code that the notebook lacks (in order); the number matched. Solution
    cells are matched by what follows them (see ``_owners``)."""
    known, present = {c.get("id") for c in reference.cells}, {c.get("id") for c in cells}
    free = [
        c for c in reference.cells if c.cell_type == "code" and SOLUTION not in cell_tags(c) and c.id not in present
    ]
    matched = 0
    for cell in cells:
        if cell.cell_type != "code" or cell.get("id") in known:
            continue
        found = next((r for r in free if visible_lines(r.source) == visible_lines(cell.source)), None)
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
    course = {c.id: c for c in reference.cells if c.cell_type == "code" and SOLUTION not in cell_tags(c)}
    checks = {cid for t in tasks for cid, _ in t.checks}
    skipped = {cid for t in tasks if not t.graded for cid, _ in t.checks}
    tolerated = {cid for t in tasks if not t.graded for cid in t.cells} - skipped
    out, notes = copy.deepcopy(nb), []
    out.nbformat, out.nbformat_minor = 4, max(5, out.get("nbformat_minor", 5))
    known = {c.get("id") for c in reference.cells}
    none_known = not any(c.get("id") in known for c in out.cells)
    matched = _match_by_source(out.cells, reference)  # cells saved without an id (all, or some)
    if none_known:
        why = (
            "its cell ids are not the handout's (re-saved by jupytext or another tool)"
            if out.cells and all(c.get("id") for c in out.cells)
            else "the notebook has no cell ids (saved by an older editor)"
        )
        notes.append((None, f"{why}: {matched} of the course's cells were recognised by their code"))
    seen = set()
    for index, cell in enumerate(out.cells):
        # a duplicated id would confuse the owners; "-course" ids are the grader's copies of course cells
        if not cell.get("id") or cell.get("id") in seen or str(cell.get("id")).endswith("-course"):
            cell["id"] = uuid.uuid4().hex[:8]
        seen.add(cell["id"])
        ref = course.get(cell["id"])
        if ref is not None and cell.cell_type != "code":  # Jupyter's M or R key on a course cell
            out.cells[index] = copy.deepcopy(ref)
            out.cells[index].outputs, out.cells[index].execution_count = [], None
            what = "its check cell" if ref.id in checks else "a cell of the course"
            notes.append(
                (
                    task_of.get(ref.id),
                    f"{what} (cell {index}) had become a {cell.cell_type} cell; "
                    "the course's code cell was put back and run",
                )
            )
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
                notes.append(
                    (
                        task_of.get(ref.id),
                        f"its check cell (cell {index}) was edited; the course's check was restored and run",
                    )
                )
                cell.source = ref.source
            elif not _only_added(cell.source, ref.source):
                notes.append(
                    (
                        task_of.get(ref.id),
                        f"the course's cell {index} was changed; the course's version "
                        "ran just before it, then the student's",
                    )
                )
                first = nbformat.v4.new_code_cell(ref.source, id=f"{ref.id}-course")
                inserted[first.id] = ref
                cells.append(first)
        cells.append(cell)
    out.cells = cells
    for cell in out.cells:
        if cell.cell_type != "code":
            continue
        tags = [t for t in cell_tags(cell) if t not in NBVAL_TAGS]
        if cell.get("id") in known:
            reference_cell = next(c for c in reference.cells if c.id == cell.get("id"))
            tags += [t for t in cell_tags(reference_cell) if t in NBVAL_TAGS]
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
