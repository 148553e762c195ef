"""Moodle's offline grading worksheet: read it (the roster and each participant's submission time) and write it
back with each Grade and Feedback comment filled in (upload at Grading action > Upload grading worksheet).

Moodle scales nothing on upload: where the worksheet's Maximum Grade is not the grading policy's maximum, each
Grade is written on Moodle's scale (points x Maximum Grade / the policy's maximum) and its comment gives the points.
"""

from __future__ import annotations

import csv
import html
import io
import re
from datetime import datetime
from pathlib import Path

from bertfamily.grading.counting import counted_rows
from bertfamily.grading.gradebook import FORMULA_START, SEMICOLONS, csv_cell, write_csv_atomically
from bertfamily.grading.pipeline import Row
from bertfamily.grading.policy import number
from bertfamily.grading.safeio import csv_text

#: The columns of Moodle's offline grading worksheet (mod/assign, "Download grading worksheet"), English
#: names; on upload Moodle matches rows by Identifier and reads Grade (and Feedback comments).
MOODLE_FIELDS = [
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum Grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Last modified (grade)",
    "Feedback comments",
]
_MOODLE_TIME = (
    "%A, %d %B %Y, %I:%M %p",
    "%A, %d %B %Y, %H:%M",
    "%d %B %Y, %I:%M %p",
    "%A, %B %d, %Y, %I:%M %p",  # English (United States): the month first
    "%A, %B %d, %Y, %H:%M",
    "%B %d, %Y, %I:%M %p",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
)


def _moodle_time(text: str) -> datetime | None:
    text = (text or "").strip()
    if not text or text == "-":
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    for fmt in _MOODLE_TIME:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise ValueError(
        f"Moodle's worksheet: cannot read the time {text!r} (Last modified (submission)); expected "
        "Moodle's English format, e.g. 'Monday, 6 March 2023, 2:15 PM' (or English (United States)'s "
        "'Monday, March 6, 2023, 2:15 PM')"
    )


def read_worksheet(path) -> tuple[dict, dict, list]:
    """Moodle's grading worksheet: (a roster by participant id, the submission times by participant
    id, the worksheet's lines to write back)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no Moodle grading worksheet at {path}")
    with io.StringIO(csv_text(path, "the Moodle grading worksheet"), newline="") as handle:
        lines = list(csv.reader(handle))
    if not lines or "Identifier" not in lines[0] or "Grade" not in lines[0]:
        raise ValueError(
            f"{path} is not Moodle's grading worksheet in English: it needs the columns Identifier and Grade "
            f"(its first columns: {', '.join(repr(h) for h in (lines[0] if lines else [])[:4]) or 'none'}). A Moodle "
            "in another language names them in it: switch your language to English (the user menu > Language) and "
            "download the worksheet again (Assignment > View all submissions > Grading action > Download grading "
            "worksheet, with 'Offline grading worksheet' on in the assignment's feedback types)"
        )
    head = lines[0]
    roster, times = {}, {}
    for number_, line in enumerate(lines[1:], 2):
        entry = dict(zip(head, line, strict=False))  # a short row: its missing fields stay out
        m = re.search(r"(\d+)\s*$", entry.get("Identifier", ""))
        if not m:
            raise ValueError(f"{path}, line {number_}: Identifier {entry.get('Identifier')!r} is not 'Participant N'")
        pid = m.group(1)
        roster[pid] = {
            "id": pid,
            "participant": pid,
            "name": entry.get("Full name", ""),
            "email": entry.get("Email address", ""),
            "status": entry.get("Status", "") if "Status" in head else None,
        }
        times[pid] = _moodle_time(entry.get("Last modified (submission)", ""))
    return roster, times, lines


def _grade_and_comment(r: Row | None, max_score, scale: float | None = None) -> tuple[str, str]:
    """Moodle's Grade and Feedback comments for ``r``; ``scale``: Moodle's Maximum Grade where it is not the
    policy's maximum (the grade is written on Moodle's scale, the comment keeps the points)."""
    if r is None:
        return "", ""  # missing: Moodle's own status says "No submission"
    if r.status == "invalid":  # Moodle imports the comment as HTML: a file's name in it is text, not a tag
        why = "; ".join(p for p in r.detail.split("; ") if not p.startswith("duplicate: ")) or r.detail
        return "0", _html(f"not graded: {why}")
    if r.score is None:  # the grader failed on it (an error row): no grade, and no number in the comment
        return "", _html(f"not graded yet ({r.status}): your instructor grades it by hand")
    score = str(r.score)
    said = f"{score} of {max_score} points ({r.status})" + (f"; {r.late}" if r.late else "")
    if score and scale and max_score:
        score = str(number(round(float(r.score) * scale / float(max_score), 2)))
        said += f"; {score} of {number(scale)} on Moodle's scale"
    return score, _html(said)


#: A ";" (or the Arabic or full-width one), then a run of formula characters, each after spaces or quotes.
_AFTER_SEMICOLON = re.compile(rf"({SEMICOLONS})((?:\s*\"*{FORMULA_START})+)")


def _html(text: str) -> str:
    """A comment as Moodle imports it (HTML: a name in it is text, not a tag), in which a formula character after
    a ``;`` (an entity's, ``&gt;=``, or the text's) is an entity too: a spreadsheet that splits on ``;`` starts no
    formula there, and Moodle shows the character itself (csv_cell's apostrophe would show)."""
    # an entity written here ends in ";" too: each formula character of a run after a ";" becomes one (one pass)
    return _AFTER_SEMICOLON.sub(
        lambda m: m[1] + re.sub(FORMULA_START, lambda f: f"&#{ord(f[0])};", m[2]), html.escape(text, quote=False)
    )


def _number_or_none(text: str) -> float | None:
    try:
        return float(text.replace(",", "."))
    except (ValueError, AttributeError):
        return None


def write_moodle(rows, worksheet_lines: list, out, force: bool = False) -> list[str]:
    """Moodle's grading worksheet with each participant's Grade (and Feedback comments) filled in from
    the submission that counts: upload it at Grading action > Upload grading worksheet. A missing student
    keeps a blank grade; an invalid submission gets 0 and a comment that says why. Returns warnings: a
    worksheet whose Maximum Grade is not the policy's maximum, a grade above it (a bonus)."""
    head = list(worksheet_lines[0])
    if "Feedback comments" not in head:
        head.append("Feedback comments")
    counted = counted_rows(rows)
    max_score = next((r.max_score for r in rows), "")
    out_lines = [head]
    for line in worksheet_lines[1:]:
        entry = dict(zip(worksheet_lines[0], line, strict=False))  # a short row, as above
        pid = re.search(r"(\d+)\s*$", entry["Identifier"])  # read_worksheet refused a line without one
        theirs = _number_or_none(entry.get("Maximum Grade", ""))
        scale = theirs if theirs and max_score and theirs != float(max_score) else None
        grade, comment = _grade_and_comment(counted.get(pid.group(1)) if pid else None, max_score, scale)
        entry["Grade"] = grade or entry.get("Grade", "")
        entry["Feedback comments"] = csv_cell(comment) if comment else entry.get("Feedback comments", "")
        out_lines.append([entry.get(h, "") for h in head])
    write_csv_atomically(out, out_lines, force, cells=lambda v: v)  # Moodle's own cells go back as Moodle wrote them
    warnings = []
    maxima = {
        entry.get("Maximum Grade", "") for entry in (dict(zip(head, line, strict=False)) for line in out_lines[1:])
    } - {""}
    theirs_all = {m for m in map(_number_or_none, maxima) if m}
    if theirs_all and theirs_all != {float(max_score or 0)}:
        warnings.append(
            f"Moodle's worksheet has Maximum Grade {', '.join(sorted(maxima))} and the grading "
            f"policy's maximum is {max_score}: each Grade is written on Moodle's scale (points x "
            f"{'/'.join(sorted(maxima))} / {max_score}); the comments give the points"
        )
    over = [
        r.student
        for r in counted.values()
        if isinstance(r.score, (int, float)) and r.score > float(max_score or 0) and max_score
    ]
    if over and theirs_all:
        warnings.append(
            f"{len(over)} grades are above the maximum (bonus points): Moodle caps them at its Maximum "
            "Grade unless the site allows grades above it (Site administration > Grades > General "
            "settings > Unlimited grades)"
        )
    return warnings
