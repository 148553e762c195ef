"""What the instructor gets from a class's rows: the gradebook CSV, the roster's ids and missing
students, Canvas's import, one feedback file per submission, and the summary table.

The rows come from :func:`bertfamily.grading.classroom.grade_class`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

from bertfamily.grading.exercise import Exercise
from bertfamily.grading.pipeline import STATUSES, Row
from bertfamily.grading.safeio import csv_text, open_folder, replacing_mode, write_in
from bertfamily.grading.scoring import NOT_STORED, REPRODUCED
from bertfamily.grading.submission import printable
from bertfamily.grading.textsafe import (
    disk_name,
    escape_controls,
    html_text,
    markdown_item,
    markdown_text,
    relative_names,
)

# --------------------------------------------------------------------------- a roster

#: Default --pattern: the student id is the file name up to its first "_", "-", "." or space
#: (alice.ipynb, alice_exercise.ipynb, 12345-distilbert.ipynb).
ID_PATTERN = r"^(?P<id>[^_\-. ]+)"
ROSTER_FIELDS = ("id", "name", "canvas_id", "sis_user_id", "sis_login_id", "section")


def read_roster(path) -> dict:
    """The students of a roster CSV, by id. Its header needs ``id``; it may have ``name`` and Canvas's
    ``canvas_id``, ``sis_user_id``, ``sis_login_id`` and ``section``. Canvas's own gradebook export
    (Student, ID, SIS User ID, SIS Login ID, Section, ...) is read as it comes: its ID is the Canvas user id."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no roster at {path}")
    with io.StringIO(csv_text(path, "the roster"), newline="") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip().lower() for h in reader.fieldnames or []]
        if "id" not in header:
            raise ValueError(
                f"the roster {path} needs an 'id' column (it has: {', '.join(header) or 'no header'}); "
                f"it may also have {', '.join(ROSTER_FIELDS[1:])}"
            )
        students = {}
        for number, raw in enumerate(reader, 2):
            entry = {k.strip().lower(): (v or "").strip() for k, v in raw.items() if k}
            if "student" in entry and "name" not in entry:  # Canvas's own gradebook export, as it comes
                if entry["student"].lower() in ("points possible", "student, test"):
                    continue  # its "Points Possible" row, and Canvas's test student
                if not entry["student"] and not entry.get("id") and "manual posting" in map(str.lower, entry.values()):
                    continue  # the row under the header where an assignment posts its grades by hand
                entry = {
                    **entry,
                    "name": entry["student"],
                    "canvas_id": entry["id"],
                    "sis_user_id": entry.get("sis user id", ""),
                    "sis_login_id": entry.get("sis login id", ""),
                }
            if not entry.get("id"):
                raise ValueError(f"the roster {path}, line {number}: no id")
            if entry["id"] in students:
                raise ValueError(f"the roster {path}, line {number}: the id {entry['id']!r} is there twice")
            students[entry["id"]] = entry
    return students


def student_id(name: str, pattern: str) -> str | None:
    """The student id in a submission's file name (``pattern``'s group ``id``), or None."""
    found = re.search(pattern, Path(name).name)
    return found.group("id") if found else None


def attribution(name: str, pattern: str, roster: dict) -> tuple[str, str]:
    """(the student a file name belongs to, or "", and what is ambiguous about it, or ""). A file name
    that is a roster id (``alice-2.ipynb``) is that student's; a name that starts with several roster
    ids (``alice-2_late.ipynb`` with alice and alice-2 on the roster) is nobody's until renamed."""
    stem = Path(name).name.removesuffix(".ipynb")
    if stem in roster:
        return stem, ""
    found = student_id(name, pattern) or ""
    starts = {r for r in roster if stem.startswith(r) and stem[len(r) : len(r) + 1] in ("_", "-", ".", " ")}
    candidates = sorted(starts | ({found} & set(roster)))
    if len(candidates) > 1:
        return "", (
            f"ambiguous: the file name could be {' or '.join(c + chr(39) + 's' for c in candidates)} (roster "
            "ids), so it counts for nobody: rename the file or pass --pattern"
        )
    run_on = (
        re.match(r"[-.]([^_ ]*\d[^_ ]*)", stem[len(found) :]) if found in roster and pattern == ID_PATTERN else None
    )
    if run_on:  # alice-2.ipynb with no alice-2 on the roster: alice's second try, or a student the roster lacks?
        name = found + run_on.group(0)
        return "", (
            f"ambiguous: the file name runs on past the roster id {found!r} ({name!r} is no roster id: "
            f"{found}'s second try, or another student's?), so it counts for nobody: rename it {found}.ipynb "
            f"or put it in a folder {found}/ (or add {name} to the roster)"
        )
    return found, ""


def apply_roster(rows, exercise: Exercise, roster: dict, pattern: str = ID_PATTERN) -> list[Row]:
    """Rows with the student id filled in; students of the roster without a submission get a
    ``missing`` row; a student with two submissions, a file matching nobody, or a file name that could
    be two students' (:func:`attribution`: attributed to neither), is said in ``detail``."""
    if "id" not in re.compile(pattern).groupindex:
        raise ValueError(f"--pattern must have a group named id, as in {ID_PATTERN!r}, got {pattern!r}")
    rows = [dataclasses.replace(r) for r in rows]
    seen: Counter[str] = Counter()
    ambiguous: dict[int, str] = {}
    for r in rows:
        r.student, ambiguous[id(r)] = attribution(r.submission, pattern, roster)
        seen[r.student] += 1
    for r in rows:
        extra = []
        if ambiguous[id(r)]:
            extra.append(ambiguous[id(r)])
        elif r.student not in roster:
            extra.append(
                f"not on the roster (id {r.student!r} from the file name)"
                if r.student
                else f"no student id in the file name (--pattern {pattern!r})"
            )
        elif seen[r.student] > 1:
            named = relative_names(o.submission for o in rows if o.student == r.student)
            others = [n for s, n in named.items() if s != r.submission]
            extra.append(f"duplicate: {r.student} also handed in {', '.join(others)}")
        r.detail = "; ".join([*extra, r.detail] if r.detail else extra)
    empty = dict.fromkeys(t.name for t in exercise.graded)
    for sid in roster:
        if sid not in seen:
            rows.append(Row("", "missing", None, len(exercise.graded), dict(empty), "no submission", student=sid))
    return sorted(rows, key=lambda r: (r.submission == "", r.submission, r.student))


# --------------------------------------------------------------------------- writing

#: The columns of a run with a deadline or a roster (:mod:`bertfamily.grading.policy`): when each file
#: was handed in and where that time came from, how late, and whether it is the submission that counts.
POLICY_FIELDS = ("submitted", "time_from", "late", "counts")


def gradebook_fields(exercise: Exercise, roster: bool = False, timed: bool = False) -> list[str]:
    return [
        "submission",
        *(["student"] if roster else []),
        "status",
        "score",
        "max_score",
        *(t.name for t in exercise.graded),
        *(POLICY_FIELDS if timed else ()),
        "outputs",
        "flags",
        "read_by_hand",
        "detail",
    ]


SEMICOLONS, FORMULA_START = r"[;\u061b\uff1b]", r"[=+\-@]"  # ; and the Arabic and full-width ones
FORMULA_AFTER_SEMICOLON = re.compile(rf"({SEMICOLONS}\s*\"*)({FORMULA_START})")


def csv_cell(value):
    """A CSV cell a spreadsheet shows as text: a string that starts like a formula (= + - @, or a tab or
    carriage return before one) gets a leading apostrophe, as OWASP recommends; so does each part after a
    ``;`` (``a;=1+1`` is ``a;'=1+1``), where a spreadsheet that splits on ``;`` (Excel, where the list
    separator is ``;``) starts a cell, quoted or not."""
    if isinstance(value, str):  # no control character either (a cell is one line; ESC, BEL, bidi marks)
        value = FORMULA_AFTER_SEMICOLON.sub(r"\1'\2", escape_controls(printable(value)))
    if isinstance(value, str) and value.lstrip()[:1] in ("=", "+", "-", "@"):
        return "'" + value
    return value


def write_csv_atomically(out, rows: list[list], force: bool, cells=csv_cell) -> None:
    """Write CSV rows atomically (a temporary file in the same folder, then a rename); an existing
    ``out`` is replaced only with ``force``; each value passes through ``cells`` (:func:`csv_cell`)."""
    out = Path(out)
    if out.exists() and not force:
        raise ValueError(f"{out} exists; pass --force to overwrite it")
    handle = tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", newline="", dir=out.parent, prefix=f".{out.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            csv.writer(handle).writerows([[cells(v) for v in row] for row in rows])
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, replacing_mode(out))
        if out.exists() and not force:
            raise ValueError(f"{out} appeared while grading; pass --force to overwrite it")
        os.replace(handle.name, out)
    finally:
        if os.path.exists(handle.name):
            os.unlink(handle.name)


def write_gradebook(
    rows, exercise: Exercise, out, force: bool = False, roster: bool = False, timed: bool = False
) -> None:
    """The gradebook CSV: one row per submission (and per missing student, with a roster); ``timed``
    adds :data:`POLICY_FIELDS`."""
    lines = [gradebook_fields(exercise, roster, timed)]
    for r in rows:
        marks = ["" if r.tasks.get(t.name) is None else r.tasks[t.name] for t in exercise.graded]
        policy = [r.submitted, r.time_from, r.late, r.counts] if timed else []
        lines.append(
            [
                r.submission,
                *([r.student] if roster else []),
                r.status,
                "" if r.score is None else r.score,
                r.max_score,
                *marks,
                *policy,
                r.outputs,
                r.flags,
                r.read_by_hand,
                r.detail,
            ]
        )
    write_csv_atomically(out, lines, force)


def feedback_markdown(row: Row, exercise: Exercise) -> str:
    """What one student reads: each task's mark, the check's ✗ line and hint, what was repaired."""
    title = markdown_text(re.sub(r"[\r\n]+", " ", Path(row.submission).name or row.student))
    lines = [
        f"# Feedback: {title}",
        "",
        f"Score: **{'–' if row.score is None else row.score} of {row.max_score}** ({row.status})",
        "",
    ]
    if row.status == "invalid":
        lines += [f"The grader could not grade this file: {markdown_item(row.detail)}.", ""]
        return "\n".join(lines)
    lines += ["| task | mark | |", "|---|:-:|---|"]
    for t in exercise.graded:
        mark = row.tasks.get(t.name)
        lines.append(f"| {t.name} | {'–' if mark is None else mark} | {t.title} |")
    lines.append("")
    for t in exercise.graded:
        said = row.feedback.get(t.name) or []
        lost = [p.split(": ", 1)[1] for p in row.detail.split("; ") if p.startswith(f"{t.name}: ")]
        # the error a check's "(see the error above)" points at is in `detail`: it goes above that line (once:
        # the gradebook's "check_x: why" is the feedback's "check_x had no answer: why")
        errors = [p for p in lost if " raised " in p and not any(p.split(": ", 1)[-1] in s for s in said)]
        errors = errors if said else []
        if said or lost:
            lines += [
                f"## {t.name}: {t.title}",
                "",
                *(f"- {markdown_item(line)}" for line in errors + (said or lost)),
                "",
            ]
    if row.read_by_hand:
        # one entry a task ("task7: the student's words"); a student's own "; " is not a boundary
        lines += [
            "## Read by your instructor",
            "",
            "Not scored by the grader; your instructor reads it:",
            "",
            *(f"- {markdown_item(part)}" for part in re.split(r"; (?=task\d+: )", row.read_by_hand)),
            "",
        ]
    # what an editor saved that Jupyter opens and the grader repaired costs nothing: the gradebook's detail keeps it
    others = [p for p in row.detail.split("; ") if p and not re.match(r"task\d+: |repaired before grading ", p)]
    if others:
        lines += ["## About the run", "", *(f"- {markdown_item(p)}" for p in others), ""]
    if row.outputs and all(part.endswith(NOT_STORED) for part in row.outputs.split("; ")):
        lines += [
            "## Outputs",
            "",
            "The notebook was handed in without its outputs, so none could be compared with "
            "the re-run (this costs no mark unless the instructor asks for it): run it from the top (Kernel → "
            "Restart & Run All), then save it, before you hand it in.",
            "",
        ]
    elif row.outputs and row.outputs != REPRODUCED:
        lines += [
            "## Outputs",
            "",
            "Not every stored output came out the same on the grader's re-run "
            f"(this costs no mark unless the instructor asks for it): {markdown_item(row.outputs)}.",
            "",
        ]
    return "\n".join(lines)


def feedback_names(rows) -> list[str]:
    """One file name per row with a submission, never the same twice in a run (letter case aside): the
    submission's name where no other submission has it (``alice.ipynb`` -> ``alice.md``), else that
    name and a digest of its whole path (``late/alice.ipynb`` -> ``alice-3f2a9c1e.md``), longer until
    every name differs (a file named like another's digest cannot take that student's feedback)."""
    import hashlib

    room = "-" + "0" * 16 + ".md"  # what is added to a stem below (but for a 64-digit digest, cut at the end)
    stems = [
        disk_name(Path(r.submission).name.removesuffix(".ipynb"), room).removesuffix(room) for r in rows
    ]  # any name: short, plain
    digests = [hashlib.sha256(r.submission.encode("utf-8", "surrogatepass")).hexdigest() for r in rows]
    shared = Counter(stem.casefold() for stem in stems)
    names = [
        f"{stem}.md" if shared[stem.casefold()] == 1 else f"{stem}-{digest[:8]}.md"
        for stem, digest in zip(stems, digests, strict=True)
    ]
    for length in (16, 64):
        taken = Counter(n.casefold() for n in names)
        clash = [i for i, n in enumerate(names) if taken[n.casefold()] > 1]
        if not clash:
            break
        for i in clash:
            names[i] = f"{stems[i]}-{digests[i][:length]}.md"
    taken = Counter(n.casefold() for n in names)
    names = [n if taken[n.casefold()] == 1 else f"{i}-{n}" for i, n in enumerate(names)]
    return [disk_name(n.removesuffix(".md"), ".md") for n in names]  # unchanged but past the length a disk takes


def write_feedback(rows, exercise: Exercise, folder) -> list[Path]:
    """One Markdown file per submission in ``folder`` (created), named by :func:`feedback_names`;
    none is written twice in a run."""
    handed = [r for r in rows if r.submission]
    return write_markdown_files(
        folder, ((name, feedback_markdown(r, exercise)) for r, name in zip(handed, feedback_names(handed), strict=True))
    )


def student_bytes(markdown: str) -> bytes:
    """A feedback's Markdown as a student may safely read it: control characters escaped, HTML shown as text."""
    return (html_text(escape_controls(printable(markdown), keep="\n")) + "\n").encode("utf-8")


def write_markdown_files(folder, named_texts) -> list[Path]:
    """Each (file name, Markdown) into ``folder`` (created), as a student may safely read it: control
    characters escaped, HTML shown as text, no link followed at any part of the path or at a name."""
    folder = Path(folder)
    written, where = [], open_folder(folder)
    try:
        for name, markdown in named_texts:
            write_in(where, name, student_bytes(markdown))
            written.append(folder / name)
    finally:
        os.close(where)
    return written


def summary(rows, exercise: Exercise) -> str:
    """The table printed at the end: per graded task, how many of the submissions that ran passed it,
    and which mistakes (the checks' ✗ lines) how many made."""
    ran = [r for r in rows if r.status not in ("invalid", "missing")]
    width = max(len(t.name) for t in exercise.tasks)
    lines = [f"{'task':<{width}}  passed  title"]  # escaped as a whole at the end: names, ✗ lines
    for t in exercise.tasks:
        if t.graded:
            passed = f"{sum(r.tasks[t.name] or 0 for r in ran)}/{len(ran)}"
            lines.append(f"{t.name:<{width}}  {passed:>6}  {t.title}")
        else:
            lines.append(f"{t.name:<{width}}  {'-':>6}  {t.title} (not graded: its result depends on the machine)")
    mistakes = Counter((t, line.split(" (hint:")[0]) for r in ran for t, said in r.feedback.items() for line in said)
    if mistakes:
        lines.append("mistakes (the checks' ✗ lines), most common first:")
        lines += [f"  {n:>3} × {t}: {line}" for (t, line), n in mistakes.most_common()]
    flagged = [r for r in rows if r.flags]
    if flagged:  # a line each (lecturer 10: one line of absolute paths could not be scanned): who, which file, why
        lines.append(f"flagged, for you to read (the flags column), {len(flagged)}:")
        for r in flagged:
            why = r.flags.split("; ")[0]
            why = why if len(why) <= 100 else why[:99] + "…"
            lines.append(f"  {r.student or '-'}  {Path(r.submission).name}: {why}")
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES if s != "missing"}
    handed = [r for r in rows if r.status != "missing"]
    lines.append(f"{len(handed)} submissions: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    strays = [r.submission for r in handed if not r.student] if any(r.student for r in rows) else []
    if strays:  # a roster in use: a file that matched no one is in no LMS file
        lines.append(
            f"{len(strays)} submission{'s' * (len(strays) != 1)} matched no student of the roster, so no "
            f"LMS file has them (rename the file, or --pattern): {', '.join(strays[:10])}"
        )
    if len(handed) < len(rows):
        nobody = len(rows) - len(handed)
        lines.append(f"{nobody} student{'s' * (nobody != 1)} of the roster handed in nothing")
    return "\n".join(escape_controls(printable(line)) for line in lines)
