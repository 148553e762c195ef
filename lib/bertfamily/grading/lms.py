"""The LMS's own exports, as they come: whose each file is, when it was handed in, and the grade files
to upload back.

Layouts recognised without a pattern (the first that fits a file wins):

``moodle``  Moodle's "Download all submissions": a folder per student, ``Jane Smith_12345_assignsubmission_file_/``,
            or, without folders, ``Jane Smith_12345_assignsubmission_file_exercise.ipynb``; 12345 is the
            participant's identifier, the number of "Participant 12345" in Moodle's grading worksheet.
``canvas``  Canvas's "Download Submissions": ``smithjane_12345_67890_exercise_distilbert.ipynb`` (the name Canvas
            sorts by, the student's Canvas user id, the file's id, the name the student uploaded), with
            ``_LATE`` after the name when Canvas marked the submission late.
``blackboard``  Blackboard Learn's ``ASSIGNMENT_USERNAME_attempt_YYYY-MM-DD-HH-MM-SS_FILE``
            (:mod:`~bertfamily.grading.blackboard`).
``folder``  a folder per student: ``alice/exercise.ipynb`` (the folder is the student).
``ambiguous`` a name that reads as both Canvas's and Moodle's (Canvas's prefix, then a classmate's
            Moodle prefix typed by the student): it counts for nobody and is flagged.
``file``    a notebook per student: ``alice.ipynb``; a name that runs on past a roster id with a number
            (``alice-2.ipynb``, and no alice-2 on the roster) is ambiguous and counts for nobody.

A file that is not a notebook (``.py``, ``.html``, ``.pdf``) in a student's place, where the student
handed in no notebook, gets an ``invalid`` row that says what to export instead.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path

from bertfamily.grading.blackboard import BLACKBOARD_FILE, BLACKBOARD_TIME, attempt_moment
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.folders import folder_match, folder_student, one_student_a_folder
from bertfamily.grading.gradebook import ID_PATTERN, attribution
from bertfamily.grading.lateness import (
    CANVAS_LATE,
    CANVAS_ON_TIME,
    FILE_TIME,
    MOODLE_EXTENDED,
    MOODLE_ON_TIME,
    MOODLE_STATUS_LATE,
)
from bertfamily.grading.pipeline import Row
from bertfamily.grading.policy import utc
from bertfamily.grading.textsafe import display_name, escape_controls, relative_names

# Moodle writes "Full Name_participant_assignsubmission_file_" and then the student's own file (or folder)
# name, which may itself look like another student's prefix: the participant is the FIRST such prefix
# (the name is matched lazily), so "Mallory_222_assignsubmission_file_Bob_333_assignsubmission_file_x.ipynb"
# is Mallory's, not Bob's. A download in folders names each "Full Name_participant_assignsubmission_file_", or
# from Moodle 4.1 on "..._assignsubmission_file" (no last "_").
MOODLE_FOLDER = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assign(?:submission|feedback)_(?P<plugin>[a-z]+)(?:_|$)")
MOODLE_FILE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_file_(?P<file>.+)$", re.DOTALL)
CANVAS_FILE = re.compile(
    r"^(?P<name>[^\W_]*?)(?P<late>_late)?_(?P<id>\d+)_(?P<attachment>\d+)_(?P<file>.+)$", re.IGNORECASE | re.DOTALL
)  # a file name may hold a newline; its name part may be empty (a name of no letter Canvas keeps)
SKIPPED = {".ipynb_checkpoints", "__MACOSX", ".DS_Store", "Thumbs.db"}
EXPORT = (
    "export the notebook itself and hand it in again: in Jupyter or JupyterLab, File > Download (or Save "
    "and Export Notebook As > Notebook, .ipynb); in Colab, File > Download > Download .ipynb; in VS Code, the "
    ".ipynb file you edited"
)


@dataclass
class Found:
    """One handed-in file, and what its place in the export says about it."""

    path: Path
    display: str  # its name in the gradebook
    layout: str  # moodle, canvas, blackboard, folder or file
    key: str  # the student in the layout: Moodle's participant id, Canvas's user id, the folder, the stem
    name: str = ""  # what the layout calls the student: Moodle's full name, Canvas's sortable name
    late: bool = False  # Canvas marked it LATE
    notebook: bool = True
    doubt: str = ""  # why the student read from the name may be another
    verdict: bool = True  # Canvas's "not late" holds: the class reads as Canvas's download (find)
    source: str = ""  # the folder given to the grader that holds it ("": a file given itself)


#: Moodle's prefix; seen twice in one name, the name can be read as two participants
_MOODLE_PREFIX = re.compile(r"_\d+_assign(?:submission|feedback)_")


def _doubt(part: str) -> str:
    if len(_MOODLE_PREFIX.findall(part)) < 2:
        return ""
    return (
        f"read by hand: {escape_controls(part)!r} holds Moodle's prefix twice (a name or a file named like "
        "a classmate's export): check whose it is in Moodle"
    )


def _lms_name(part: str, folder: bool) -> re.Match | None:
    """The LMS's prefix a folder's or a file's name starts with (Moodle's, else Canvas's), or None."""
    return MOODLE_FOLDER.match(part) if folder else MOODLE_FILE.match(part) or CANVAS_FILE.match(part)


def _student_folders(root: Path) -> bool:
    """Whether the folders at the top of ``root`` are students' own (``alice/exercise.ipynb``): two or more of them
    hold a notebook whose name no LMS gave. Then a name inside one that reads as an LMS's export is still that
    student's (a file Mallory named like Bob's Canvas file is hers); else a top folder holding LMS names is the
    download itself, unzipped into it (a notebook of the lecturer's own beside it included)."""
    plain = 0
    for entry in sorted(os.listdir(root)) if root.is_dir() else ():
        top = root / entry
        if (
            entry in SKIPPED
            or entry.startswith(".")
            or MOODLE_FOLDER.match(entry)
            or not top.is_dir()
            or top.is_symlink()
        ):
            continue
        for _, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in SKIPPED and not MOODLE_FOLDER.match(d)]
            if any(Path(f).suffix.lower() in (".ipynb", ".zip") and not _lms_name(f, False) for f in files):
                plain += 1
                break
    return plain >= 2


def _in_a_students_folder(path: Path, rel: tuple, display: str, notebook: bool) -> Found:
    """A file in a student's own top folder: hers, whatever its name; one named like another's LMS export is
    flagged for the instructor."""
    names = [(part, _lms_name(part, i < len(rel) - 2)) for i, part in enumerate(rel[1:])]
    other = [(part, m) for part, m in names if m and rel[0].casefold() not in (m["name"].casefold(), m["id"])]
    doubt = (
        f"read by hand: {escape_controls(other[0][0])!r} in {escape_controls(rel[0])!r}'s folder is named like "
        f"an LMS's export of another student ({escape_controls(other[0][1]['name'])}, {other[0][1]['id']}): it "
        f"counts as {escape_controls(rel[0])!r}'s; check whose it is"
        if other
        else ""
    )
    return Found(path, display, "folder", rel[0], rel[0], notebook=notebook, doubt=doubt)


def _identify(path: Path, root: Path | None, student_folders: bool = False) -> Found:
    found = _read_name(path, root, student_folders)
    found.source = str(root) if root is not None else ""
    return found


def _read_name(path: Path, root: Path | None, student_folders: bool) -> Found:
    rel = path.relative_to(root).parts if root is not None else (path.name,)
    display = display_name(path)  # as classroom.collect names the row
    notebook = path.suffix.lower() in (".ipynb", ".zip")  # a zipped notebook is graded (submission.from_zip)
    if student_folders and len(rel) > 1 and not MOODLE_FOLDER.match(rel[0]):
        return _in_a_students_folder(path, rel, display, notebook)
    for part in rel[:-1]:
        m = MOODLE_FOLDER.match(part)
        if m:  # an online-text or feedback folder holds no handed-in file: left out
            return Found(
                path,
                display,
                "moodle" if m["plugin"] == "file" else "skip",
                m["id"],
                m["name"],
                notebook=notebook and m["plugin"] == "file",
                doubt=_doubt(part),
            )
    m, c = MOODLE_FILE.match(path.name), CANVAS_FILE.match(path.name)
    if m and c:  # Canvas's prefix, then a Moodle prefix the student typed (or the reverse): whose is it?
        return Found(
            path,
            display,
            "ambiguous",
            "",
            notebook=notebook,
            doubt=(
                f"read by hand: {escape_controls(path.name)!r} reads as Canvas's export (user {c['id']}) and as "
                f"Moodle's (participant {m['id']}): it counts for nobody; check in the LMS whose it is"
            ),
        )
    if m:
        return Found(path, display, "moodle", m["id"], m["name"], notebook=notebook, doubt=_doubt(path.name))
    if c:
        m = c
        return Found(path, display, "canvas", m["id"], m["name"], late=bool(m["late"]), notebook=notebook)
    if b := BLACKBOARD_FILE.match(path.name):
        return Found(path, display, "blackboard", b["user"], b["user"], notebook=notebook)
    if len(rel) > 1:
        return Found(path, display, "folder", rel[0], rel[0], notebook=notebook)
    return Found(path, display, "file", path.name.removesuffix(path.suffix), notebook=notebook)


def find(paths) -> list[Found]:
    """Every file handed in under ``paths`` (files, or folders as the LMS exported them), sorted by name:
    notebooks, and the other files of LMS layouts (graded ``invalid``, saying what to export)."""
    found: dict[str, Found] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir() and not path.is_symlink():
            students = _student_folders(path)
            for top, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
                for f in files:
                    if f in SKIPPED or (f.startswith(".") and not f.endswith(".ipynb")):
                        continue
                    member = Path(top) / f
                    found.setdefault(os.path.abspath(member), _identify(member, path, students))
                for d in dirs:  # a linked folder named like a notebook: refused by the grader, as before
                    if d.endswith(".ipynb") and os.path.islink(os.path.join(top, d)):
                        found.setdefault(
                            os.path.abspath(os.path.join(top, d)), _identify(Path(top) / d, path, students)
                        )
        elif path.is_file() or path.is_symlink():
            found.setdefault(os.path.abspath(path), _identify(path, None))
        elif path.exists():
            raise ValueError(f"{given} is neither a file nor a folder")
        else:
            raise ValueError(f"no such file or folder: {given}")
    kept = [
        f
        for f in found.values()
        if f.layout != "skip" and (f.notebook or f.layout in ("moodle", "canvas", "folder", "ambiguous"))
    ]
    if not kept:
        raise ValueError("nothing to grade: give notebooks, or folders of them as Canvas or Moodle export them")
    canvas_verdicts(kept, None)
    return sorted(kept, key=lambda f: f.display)


def canvas_verdicts(found: list[Found], roster: dict | None) -> None:
    """Canvas's "not late" holds for its files (``Found.verdict``) only where the folder given that holds them
    (the files given themselves: one) reads as Canvas's download: two or more students' notebooks there carry
    Canvas's names, more than any other layout's, counting, with a roster, only the students its Canvas user ids
    name (a late student's files named with made-up ids, or one e-mailed file in a folder of its own, make none)."""
    ids = {s.get("canvas_id") or sid: sid for sid, s in (roster or {}).items()} | {sid: sid for sid in roster or {}}
    for source in {f.source for f in found}:
        here = [f for f in found if f.source == source]
        canvas = {ids.get(f.key, "") if roster else f.key for f in here if f.layout == "canvas" and f.notebook} - {""}
        others = {(f.layout, f.key) for f in here if f.layout in ("file", "folder", "moodle") and f.notebook}
        for f in here:
            f.verdict = f.layout != "canvas" or len(canvas) >= max(2, len(others))


# --------------------------------------------------------------------------- whose, and when


def roster_match(f: Found, roster: dict) -> tuple[str, str]:
    """(the roster id of ``f``'s student or "", what is wrong with it or "")."""
    if f.layout == "canvas":
        for sid, s in roster.items():
            if f.key in (s.get("canvas_id"), sid):
                return sid, ""
        if f.name in roster:
            return f.name, ""
        return "", f"not on the roster (Canvas user id {f.key}, {f.name})"
    if f.layout == "moodle":
        for sid, s in roster.items():
            if f.key in (s.get("participant"), sid):
                return sid, ""
        named = [sid for sid, s in roster.items() if s.get("name", "").casefold() == f.name.casefold()]
        if len(named) == 1:
            return named[0], ""
        return "", f"not on the roster (Moodle participant {f.key}, {f.name})"
    if f.layout == "ambiguous":
        return (
            "",
            "ambiguous: the file name reads as two students' (Canvas's and Moodle's prefixes), so it counts for nobody",
        )
    if f.layout == "folder" and (sid := folder_student(f.key, roster)):  # the folder is the student (folders.py)
        return sid, ""
    if f.layout == "blackboard":  # the user name: a roster id, or the roster's login or e-mail
        sid, exact = folder_match(f.key, roster)
        return (sid, "") if exact else ("", f"not on the roster (Blackboard user {f.key})")
    sid, ambiguous = attribution(f.path.name, ID_PATTERN, roster)
    if ambiguous:
        return "", ambiguous
    return (
        (sid, "")
        if sid in roster
        else ("", f"not on the roster (id {sid!r} from the file name)" if sid else "no student id in the file name")
    )


def canvas_test_student(f: Found, roster: dict | None) -> bool:
    """Whether ``f`` is the file of Canvas's Test Student (a lecturer's Student View): Canvas names it by its
    sortable name, ``studenttest``, and no roster student has its user id."""
    return f.layout == "canvas" and f.name.casefold() == "studenttest" and not (roster and roster_match(f, roster)[0])


def plain_key(f: Found) -> str:
    """The student of ``f`` without a roster, as the layout names them."""
    if f.layout == "moodle":
        return f"{f.name}_{f.key}"
    if f.layout == "canvas":
        return f"{f.name}_{f.key}"
    if f.layout in ("folder", "blackboard"):
        return f.key
    return ""  # a plain file without a roster: as before, no student column


def submitted(f: Found, times: dict, tz, status: str | None = None) -> tuple[str, str]:
    """(when ``f`` was handed in, ISO 8601, and where that came from): the LMS's worksheet where it has
    the student's time, else the file's modification time; Canvas's LATE mark is said as well, and what
    the Moodle worksheet's ``status`` says of lateness (None: the worksheet has no Status)."""
    when, source = "", ""
    said = times.get(f.key) if f.layout == "moodle" else None  # the LMS's time: Moodle's worksheet, Blackboard's name
    said = attempt_moment(f.path.name) if f.layout == "blackboard" else said
    if said:  # in the LMS's own zone where it says none: the deadline's (tz)
        moment = said.replace(tzinfo=tz) if said.tzinfo is None and tz is not None else said
        when = moment.astimezone(timezone.utc).isoformat() if moment.tzinfo else moment.isoformat()
        source = BLACKBOARD_TIME if f.layout == "blackboard" else "Moodle's worksheet (Last modified (submission))"
    else:
        try:
            when, source = utc(os.lstat(f.path).st_mtime), FILE_TIME
        except OSError:
            pass
    if f.layout == "canvas" and (f.late or f.verdict):  # Canvas decides lateness (lateness.late_by) in its download
        source += f"; {CANVAS_LATE if f.late else CANVAS_ON_TIME}"
    if f.layout == "moodle" and status is not None:  # and Moodle, by its Status ("1 day 2 hours late")
        late = MOODLE_STATUS_LATE.search(status)
        source += f"; Moodle's Status: {late.group(1)} late" if late else f"; {MOODLE_ON_TIME}"
        if "xtension granted" in status:  # Moodle's verdict counts it already: the grader's must not again
            source += f"; {MOODLE_EXTENDED}"
    return when, source


def attribute(
    rows, found: list[Found], exercise: Exercise, roster: dict | None, times: dict | None = None, tz=None
) -> list[Row]:
    """The rows of ``found`` (graded rows for the notebooks, ``invalid`` rows made here for other files)
    with each student found from the layout, the time handed in, and with a roster a ``missing`` row
    for each student who handed in nothing; problems are said in ``detail``."""
    by_display = {r.submission: r for r in rows}
    names = [t.name for t in exercise.graded]
    if roster is not None:
        canvas_verdicts(found, roster)
    out, owners = [], {}
    for f in found:
        owners[f.display] = roster_match(f, roster) if roster is not None else (plain_key(f), "")
    if roster is not None:  # a folder is one student's, also where its name is no roster student's
        folder_of = {f.display: f.key for f in found if f.layout == "folder"}
        matches = {k: folder_match(k, roster) for k in set(folder_of.values())}
        rank = {k: 2 if strong else 1 if sid else 0 for k, (sid, strong) in matches.items()}
        owners = one_student_a_folder(owners, folder_of, rank)
    data_zips = {d for d, r in by_display.items() if r.status == "invalid" and d.lower().endswith(".zip")}
    real = {f.display for f in found if f.notebook} - data_zips  # a zip of no notebook to grade: a data file
    has_notebook = {owners[d][0] or d for d in real}
    for f in found:
        sid, problem = owners[f.display]
        if f.display in real or (f.notebook and (sid or f.display) not in has_notebook):
            r = dataclasses.replace(by_display[f.display])
        elif (sid or f.display) in has_notebook:
            continue  # a data file, a PDF or a zip of data beside the student's notebook
        else:
            r = Row(
                f.display,
                "invalid",
                None,
                len(names),
                dict.fromkeys(names),
                f"not a notebook ({f.path.suffix or 'no extension'}): {EXPORT}",
            )
        if r.status == "invalid" and r.detail.startswith("not a notebook:"):
            r.detail = f"{r.detail}: {EXPORT}"
        r.student = sid
        if f.doubt:  # in the flags: the summary lists the row for the instructor to read
            r.flags = "; ".join(p for p in (f.doubt, r.flags) if p)
        status = (roster or {}).get(f.key, {}).get("status") if f.layout == "moodle" else None
        r.submitted, r.time_from = submitted(f, times or {}, tz, status)
        if problem.startswith("read by hand:"):  # in the flags: the summary lists the row
            r.flags = "; ".join(p for p in (problem, r.flags) if p)
        elif problem:
            r.detail = "; ".join(p for p in (problem, r.detail) if p)
        out.append(r)
    seen: dict[str, list[str]] = {}
    for r in out:
        if r.student:
            seen.setdefault(r.student, []).append(r.submission)
    if roster is not None:
        for r in out:
            named = relative_names(seen.get(r.student, []))  # as the student's feedback names them
            others = [n for s, n in named.items() if s != r.submission]
            if others:
                r.detail = "; ".join(
                    p for p in (f"duplicate: {r.student} also handed in {', '.join(others)}", r.detail) if p
                )
        empty = dict.fromkeys(names)
        out += [
            Row("", "missing", None, len(names), dict(empty), "no submission", student=sid)
            for sid in roster
            if sid not in seen
        ]
    return sorted(out, key=lambda r: (r.submission == "", r.submission, r.student))
