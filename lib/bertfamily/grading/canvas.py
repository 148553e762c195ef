"""Canvas: its own gradebook export read for the assignment's column and points possible, and its grade-import CSV
written (the roster, the lines and the feedback are :mod:`~bertfamily.grading.gradebook`'s)."""

from __future__ import annotations

import csv
import io
import re

from bertfamily.grading.gradebook import write_csv_atomically
from bertfamily.grading.safeio import csv_text

#: Canvas's grade-import CSV: these five columns, then one column per assignment, named as Canvas
#: exports it ("Name (assignment id)"); the "Points Possible" row is optional and written.
CANVAS_FIELDS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def canvas_points(path, assignment: str) -> float | None:
    """Canvas's points possible of ``assignment`` in Canvas's own gradebook export (the roster at ``path``), or
    None (another roster, no such row). A ValueError where the export has assignment columns ("Name (id)") and
    ``assignment`` is none of them: Canvas would import the grades into a new column, the real one left empty."""
    with io.StringIO(csv_text(path, "Canvas's export"), newline="") as handle:
        lines = list(csv.reader(handle))
    header = [h.strip() for h in lines[0]] if lines else []
    if "student" not in [h.lower() for h in header]:
        return None
    columns = [h for h in header if re.search(r"\(\d+\)$", h)]
    if columns and assignment.strip() not in header:
        raise ValueError(
            f"--canvas-assignment {assignment!r} is not a column of Canvas's export {path}: its "
            f"assignments are {', '.join(repr(c) for c in columns[:10])}"
        )
    if assignment.strip() not in header:
        return None
    at = header.index(assignment.strip())
    for line in lines[1:]:
        if line and line[0].strip().lower() == "points possible" and at < len(line):
            try:
                return float(line[at]) if float(line[at]) > 0 else None
            except ValueError:
                return None
    return None


def write_canvas(rows, roster: dict, assignment: str, out, force: bool = False, points=None) -> list[str]:
    """A Canvas grade-import CSV of the roster's students: the score of the submission that counts
    (:func:`bertfamily.grading.policy.counted_rows`: as the row's ``counts`` says, else the latest);
    an ``invalid`` one scores 0 (handed in, not gradable: its feedback says why); a student who handed
    in nothing (``missing``) is left blank, so Canvas keeps its own missing-work policy. ``points``: Canvas's
    points possible (:func:`canvas_points`); where it is not the policy's maximum, each score is written on
    Canvas's scale (Canvas scales nothing on import), and the warning returned says so."""
    from bertfamily.grading.counting import counted_rows
    from bertfamily.grading.policy import number

    if not assignment.strip():
        raise ValueError("--canvas-assignment must name the assignment column, e.g. 'DistilBERT exercise (1234)'")
    possible = max((r.max_score for r in rows), default=0)
    scale = points if points and possible and points != possible else None
    best = {
        sid: 0 if r.status == "invalid" else (number(round(r.score * scale / possible, 2)) if scale else r.score)
        for sid, r in counted_rows(rows).items()
        if sid in roster and (r.score is not None or r.status == "invalid")
    }
    lines: list[list] = [CANVAS_FIELDS + [assignment], ["Points Possible", "", "", "", "", number(scale or possible)]]
    for sid, s in roster.items():
        lines.append(
            [
                s.get("name", ""),
                s.get("canvas_id", ""),
                s.get("sis_user_id", "") or sid,
                s.get("sis_login_id", ""),
                s.get("section", ""),
                best.get(sid, ""),
            ]
        )
    write_csv_atomically(out, lines, force)
    if not scale:
        return []
    return [
        f"Canvas's points possible of {assignment} is {number(scale)}, the grading policy's maximum "
        f"{number(possible)}: {out} gives each score on Canvas's scale (points x {number(scale)} / "
        f"{number(possible)}); the gradebook and the feedback keep the points"
    ]
