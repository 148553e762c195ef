"""How late a submission was: from its time and its deadline (the class's, or the student's extension),
unless the LMS it came from said.

Canvas marks a late file in its name (``_LATE``) and Moodle says it in the worksheet's Status ("1 day 2
hours late"), each by its own due date and the student's extension; their file times carry no time zone
(a zip's) or the downloader's (Moodle's worksheet). Where the LMS said, it decides.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path


def late_by(row, due: datetime | None, extended: datetime | None = None) -> timedelta | None:
    """How late ``row`` was (None: on time, or nothing says). The LMS decides where it said: a Canvas file
    is late when Canvas marked it LATE (by its own due date and the student's extensions), whatever the
    file's time says, and on time when it did not (a zip's file times carry no time zone); a Moodle
    submission is late by what the worksheet's Status says ("1 day 2 hours late", after the student's
    extension), on time when it says no such thing (its times are in the downloader's zone).

    ``extended``: the student's own deadline given to the grader (``--extension``), later than ``due``; it
    moves the LMS's verdict by as much (late by Moodle's "2 days" with a one-day extension: 1 day), but for a
    Moodle submission whose Status says Moodle granted one (its verdict counts that extension already). Moodle
    rounds its delay down: a submission its words put within the extension is on time (the benefit of the doubt).
    """
    shift = (extended - due) if extended and due and extended > due else timedelta(0)
    if MOODLE_EXTENDED in (row.time_from or ""):
        shift = timedelta(0)
    when = datetime.fromisoformat(row.submitted) if row.submitted else None
    moodle = MOODLE_LATE.search(row.time_from)
    if moodle:
        late = moodle_duration(moodle.group(1)) - shift
        return late if late > timedelta(0) else None
    if CANVAS_ON_TIME in row.time_from or MOODLE_ON_TIME in row.time_from:
        return None
    deadline = extended or due
    if deadline and when and when > deadline:
        return when - deadline
    if CANVAS_LATE in row.time_from:
        return None if shift and when and deadline and when <= deadline else timedelta(0)
    return None


def with_extension(row, due: datetime | None, extended: datetime | None) -> tuple[str, timedelta | None]:
    """``row``'s ``time_from`` and how late it was (:func:`late_by`): where only the student's extension makes
    it on time (Canvas or Moodle marked it late, or its time is past the class's deadline), ``time_from`` says
    so, so that the gradebook's row explains its empty ``late`` (an earlier run's note is replaced)."""
    said = row.time_from.split(EXTENDED)[0] if row.time_from else row.time_from
    late = late_by(row, due, extended)
    if late is None and extended and due and extended > due and late_by(row, due) is not None:
        return f"{said}{EXTENDED}{extended.isoformat()}", late
    return said, late


#: What ``time_from`` adds where an extension made a submission on time that the deadline makes late.
EXTENDED = "; on time by the student's extension until "
#: What ``time_from`` says of a Canvas file (lms.submitted): Canvas decides which are late.
CANVAS_LATE, CANVAS_ON_TIME = "Canvas marked it LATE", "Canvas did not mark it late"
#: ... and of a Moodle submission whose worksheet has a Status (lms.submitted): Moodle decides.
MOODLE_ON_TIME = "Moodle's Status does not say late"
MOODLE_EXTENDED = "Moodle's Status: extension granted"
MOODLE_LATE = re.compile(r"Moodle's Status: (\d[\w ,]*?) late\b")
_UNITS = {"year": 365 * 86400, "day": 86400, "hour": 3600, "min": 60, "sec": 1}
_UNIT = r"(\d+)\s*(year|day|hour|min|sec)"
#: Moodle's words for a late submission in the worksheet's Status (its format_time, then "late").
MOODLE_STATUS_LATE = re.compile(r"(\d+ (?:year|day|hour|min|sec)s?(?: \d+ (?:year|day|hour|min|sec)s?)*) late\b")


def _delay(text: str) -> tuple[list, int]:
    """Moodle's delay words as (amount, unit) pairs, largest first, and the seconds they say."""
    found = re.findall(_UNIT, text)
    return found, sum(int(amount) * _UNITS[unit] for amount, unit in found)


def moodle_duration(text: str) -> timedelta:
    """Moodle's words for a time span (its ``format_time``: "1 day 2 hours", "5 mins 3 secs") as a timedelta.

    Moodle says only the two largest units ("1 day" for 1 day and 40 minutes): where the seconds are not
    said, the span is taken as one second longer than its words, so that a penalty per started day counts
    the day Moodle's rounding hid (it would charge one day too few for "1 day" meant as 1 day 0 h 40 min)."""
    found, seconds = _delay(text)
    return timedelta(seconds=seconds + (1 if found and found[-1][1] != "sec" else 0))


def late_words(late: timedelta, row=None) -> str:
    """How late, in words: to the minute from times, or in the units Moodle's Status gave (``row``'s), which
    says no more ("1 day 14 hours late": not "1 d 14 h 0 min")."""
    if not late:
        return "late (the LMS marked it late)"
    minutes = int(late.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    if row is not None and MOODLE_LATE.search(row.time_from or ""):
        said = [f"{n} {unit}" for n, unit in ((days, "d"), (rest // 60, "h"), (rest % 60, "min")) if n]
        return f"late by {' '.join(said) or '0 min'} (Moodle's Status)"
    return "late by " + (f"{days} d " if days else "") + f"{rest // 60} h {rest % 60} min"


def worksheet_offset(rows, due: datetime | None) -> timedelta | None:
    """How far a Moodle worksheet's times sit from the deadline's zone, where its Status tells (None: it does
    not, or they agree): for each late row, its time less the deadline less Moodle's own delay, which Moodle
    rounds down (below its largest unit: "1 day 10 hours" is 1 day 10 to 11 hours); the quarter hour of an
    hour or more that every late row allows (a worksheet downloaded from a profile in another zone)."""
    low, high = None, None
    for row in rows:
        late = MOODLE_LATE.search(row.time_from or "")
        if not (late and row.submitted and due):
            continue
        found, said = _delay(late.group(1))
        hidden = {"year": 86400, "day": 3600, "hour": 60, "min": 1}.get(found[0][1], 0) if found else 0
        gap = (datetime.fromisoformat(row.submitted) - due).total_seconds() - said  # the offset, at most
        low = gap - hidden if low is None else max(low, gap - hidden)
        high = gap if high is None else min(high, gap)
    if low is None or high is None or low > high or low <= 0 <= high:
        return None
    quarter = 900 * (high // 900)  # the zone's offset: a multiple of a quarter hour in [low, high]
    return timedelta(seconds=quarter) if quarter >= low and abs(quarter) >= 3600 else None


#: What ``time_from`` says where the file's own time decides (lms.submitted).
FILE_TIME = "the file's modification time"


def copied_times(rows, due: datetime | None) -> list:
    """The late rows whose file times decide, where three or more are late and all of them within ten minutes
    of each other: files copied (``cp`` without ``-p``, from e-mail or a USB stick) rather than unzipped carry
    the time they were copied, not when they were handed in. Empty where that is not so."""
    late = [
        r
        for r in rows
        if FILE_TIME in (r.time_from or "") and r.submitted and due and datetime.fromisoformat(r.submitted) > due
    ]
    timed = [r for r in rows if FILE_TIME in (r.time_from or "") and r.submitted]
    if len(late) < 3 or len(late) != len(timed):
        return []
    times = sorted(datetime.fromisoformat(r.submitted) for r in late)
    return late if times[-1] - times[0] <= timedelta(minutes=10) else []


def unmarked_late(rows, due: datetime | None) -> list:
    """The rows Moodle's Status calls on time though their worksheet time is more than 14 hours (more than any
    time zone explains) past ``due``: an assignment with no due date (or another one) in Moodle."""
    return [
        r
        for r in rows
        if MOODLE_ON_TIME in (r.time_from or "")
        and MOODLE_EXTENDED not in (r.time_from or "")
        and r.submitted
        and due
        and datetime.fromisoformat(r.submitted) - due > timedelta(hours=14)
    ]


def _names(submission: str, student: str) -> tuple:
    """What an extension may name a submission by: its student's id where it has one (a file's name is the
    student's to choose: Mallory's ``20001.ipynb`` in her own folder must not take Alice's extension, red team round
    15), else its file's name and that name's stem (a class graded without a roster)."""
    if student:
        return (student,)
    name = Path(submission).name if submission else ""
    return tuple(k for k in (name, Path(name).stem) if k)


def due_of(row, extensions: dict, due: datetime | None) -> datetime | None:
    """The deadline that ``row``'s student has: an extension's (by the student's id, else the file's name)."""
    named = [extensions[k] for k in _names(row.submission, row.student) if k in extensions]
    return named[0] if named else due


def check_extensions(extensions: dict, students: dict, roster=()) -> None:
    """Every extension names a student of the class: ``students`` maps each submission's name to its
    student's id (or ""), ``roster`` the roster's ids (who handed in nothing included); asked before grading,
    so that a typo costs no run."""
    known = {k for name, sid in students.items() for k in _names(name, sid)}
    known |= set(roster)
    unknown = sorted(set(extensions) - known)
    files = {k: sid for name, sid in students.items() if sid for k in _names(name, "")}
    if set(unknown) & set(files):  # a file's name where its student has an id: the id decides (see _names)
        key = min(set(unknown) & set(files))
        raise ValueError(
            f"an extension for {key}: that is {files[key]}'s file; name the student by their id, "
            f"--extension {files[key]}=WHEN (a file's name is the student's to choose)"
        )
    if unknown:
        ids = sorted({sid or Path(name).stem for name, sid in students.items()} | set(roster))
        names = {i: (roster.get(i) or {}).get("name", "") for i in ids} if isinstance(roster, dict) else {}
        said = [f"{i} ({names[i]})" if names.get(i) else i for i in ids]
        raise ValueError(
            f"an extension for {', '.join(unknown)}: no such student or submission; the students are "
            f"{', '.join(said[:20])}" + (" ..." if len(said) > 20 else "")
        )


def extensions_file(out) -> Path:
    """Where the ``--extension`` options given for a gradebook are kept, beside it: a later run (a regrade of
    another student, a resume) applies them again, so a one-off extension is not taken back by leaving it out."""
    out = Path(out)
    return out.with_name(out.name + ".extensions")


def remembered_extensions(out, given=()) -> list[str]:
    """The ``--extension`` options of earlier runs of ``out`` (:func:`extensions_file`, one ``STUDENT=WHEN``
    a line), then ``given``: a student's later option overrides an earlier one."""
    path = extensions_file(out)
    earlier = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    merged: dict = {}
    for option in [*earlier, *given]:
        student, sep, _ = option.partition("=")
        merged[student.strip() if sep and student.strip() else option] = option.strip()  # a bad one: refused later
    return list(merged.values())


def remember_extensions(out, options) -> None:
    """Keep ``options`` (every ``--extension`` in force for ``out``) for the next run; none: nothing kept."""
    path = extensions_file(out)
    if options:
        path.write_text("".join(f"{o}\n" for o in options), encoding="utf-8")
    elif path.is_file():
        path.unlink()


def time_warnings(rows, due: datetime | None, moodle_status: bool) -> list[str]:
    """What the hand-in times of a class suggest went wrong, for the grading command to say: a Moodle worksheet
    from another time zone (:func:`worksheet_offset`), a Moodle assignment with another due date
    (:func:`unmarked_late`), files copied rather than unzipped (:func:`copied_times`)."""
    said = []
    offset = worksheet_offset(rows, due) if moodle_status else None
    if offset:
        said.append(
            f"Moodle's worksheet times read {offset.total_seconds() / 3600:+g} h from the deadline's zone (its "
            "Status says how late each late one was): downloaded from a profile in another time zone? The "
            "submitted column shows them as written; lateness follows Moodle's Status"
        )
    copied = copied_times(rows, due)
    if copied:
        said.append(
            f"all {len(copied)} submissions whose file times decide are late, by times within ten minutes of "
            "each other: were the files copied (not unzipped, or cp without -p)? Copying gives a file the time "
            "it was copied; lateness here follows those times"
        )
    unmarked = unmarked_late(rows, due) if moodle_status else []
    if unmarked:
        said.append(
            f"Moodle's Status calls {len(unmarked)} submission{'s' * (len(unmarked) > 1)} on time that its "
            f"worksheet times put more than 14 h past the deadline ({unmarked[0].submission}...): has the "
            "assignment this due date in Moodle? Moodle's Status decides lateness"
        )
    return said
