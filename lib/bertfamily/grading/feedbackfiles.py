"""The students' feedback files: one Markdown file per handed-in submission (named by student), Moodle's
feedback zip, and the files an earlier run left for a regraded student that this run did not write again."""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import datetime
from pathlib import Path

from bertfamily.grading.exercise import Exercise
from bertfamily.grading.gradebook import feedback_markdown, feedback_names, student_bytes, write_markdown_files
from bertfamily.grading.lateness import due_of
from bertfamily.grading.lms import MOODLE_FOLDER
from bertfamily.grading.pipeline import Row
from bertfamily.grading.policy import number
from bertfamily.grading.safeio import open_folder, write_in
from bertfamily.grading.textsafe import MAX_NAME_BYTES, disk_name, escape_controls


def feedback_files(rows) -> list[tuple[Row, str]]:
    """(row, file name) for each handed-in row: ``STUDENT.md`` where the student handed in one file,
    ``STUDENT-FILE.md`` for each of several; rows with no student keep the submission's own name."""
    handed = [r for r in rows if r.submission]
    count: dict[str, int] = {}
    for r in handed:
        count[r.student] = count.get(r.student, 0) + 1
    pseudo = []
    for r in handed:
        stem = Path(r.submission).name.removesuffix(".ipynb")
        name = stem if not r.student else r.student if count[r.student] == 1 else f"{r.student}-{stem}"
        pseudo.append(Row(str(Path(r.submission).parent / re.sub(r"[/\\\x00]", "_", name)), "", None, 0, {}, ""))
    return list(zip(handed, feedback_names(pseudo), strict=True))


def feedback_text(row: Row, exercise: Exercise, policy=None) -> str:
    """One student's Markdown: the grader's feedback, with the points of each task and the time."""
    text = feedback_markdown(row, exercise)
    if policy is not None and row.status not in ("invalid", "missing"):
        for t in exercise.graded:
            points = policy.tasks[t.name].points
            mark = row.tasks.get(t.name)
            bonus = " (bonus)" if policy.tasks[t.name].bonus else ""
            shown = "–" if mark is None else mark
            text = text.replace(
                f"| {t.name} | {shown} | {t.title} |",
                f"| {t.name} | {shown} of {number(points)}{bonus} | {t.title} |",
                1,
            )
        text = text.replace("| task | mark | |", "| task | points | |", 1)
    extra = []
    if row.submitted:  # in the deadline's zone, as the class was told it
        zone = policy.due.tzinfo if policy is not None and policy.due else None
        shown = datetime.fromisoformat(row.submitted).astimezone(zone).isoformat() if zone else row.submitted
        extra.append(f"- handed in: {shown} (from {row.time_from})")
    extended = due_of(row, policy.extensions, policy.due) if policy is not None and policy.due else None
    if extended and extended != policy.due:  # an LMS's own word ("Canvas marked it LATE") is read against it
        extra.append(f"- your deadline: {extended.isoformat()} (an extension; the class's: {policy.due.isoformat()})")
    if row.late:
        extra.append(f"- {row.late}")
    if row.counts and row.counts != "yes":
        extra.append(f"- this submission does not count: {row.counts.removeprefix('no: ')}")
    if extra:
        text = text.rstrip("\n") + "\n\n## Your submission\n\n" + "\n".join(extra) + "\n"
    return text


#: Beside the feedback files: the digest of each as the grader last wrote it. A file whose bytes are neither that
#: nor this run's was changed since (a line a lecturer added): it is kept, and this run's goes beside it.
WRITTEN = ".bertfamily-feedback.json"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(where: int, name: str, limit: int = 2**24) -> bytes | None:
    """The bytes of the regular file ``name`` in the folder ``where`` (None: none, or a link, never followed)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=where)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit)


def _edited(old: bytes | None, new: bytes, written: str | None) -> bool:
    """Whether a file's bytes ``old`` are neither this run's ``new`` nor what the grader wrote there (``written``,
    their digest): changed by hand since."""
    return old is not None and old != new and _digest(old) != written


def _beside(name: str, taken: set) -> str:
    """``NAME.new.md`` for ``NAME.md`` (``NAME.new-2.md``, ... where ``taken``, casefolded, holds it: a classmate's
    file named ``alice.new.ipynb`` has ``alice.new.md``), within a file name's length."""
    stem, number = name.removesuffix(".md"), 1
    while True:
        mark = ".new" if number == 1 else f".new-{number}"
        short = stem
        while len(f"{short}{mark}.md".encode()) > MAX_NAME_BYTES:
            short = short[:-1]
        if f"{short}{mark}.md".casefold() not in taken:
            return f"{short}{mark}.md"
        number += 1


def write_student_feedback(rows, exercise: Exercise, folder, policy=None, only=None, kept=None) -> list[Path]:
    """One Markdown file per handed-in row in ``folder`` (created), named by student
    (:func:`feedback_files`); with ``only`` (a set of submissions), just those files are written. A file changed
    since the grader wrote it (:data:`WRITTEN`) is never overwritten: this run's feedback goes beside it
    (``NAME.new.md``, :func:`_beside`) and ``"NAME.md (this run's: NAME.new.md)"`` into ``kept`` (a list), for the
    command to say."""
    named = [
        (disk_name(name), feedback_text(r, exercise, policy))
        for r, name in feedback_files(rows)
        if only is None or r.submission in only
    ]
    where = open_folder(folder)
    try:
        try:
            record = json.loads(_read(where, WRITTEN) or b"{}")
        except ValueError:
            record = {}
        record = record if isinstance(record, dict) else {}
        out, taken = [], {disk_name(name).casefold() for _, name in feedback_files(rows)}  # every student's
        for name, text in named:
            old, new = _read(where, name), student_bytes(text)
            if _edited(old, new, record.get(name)):
                beside = _beside(name, taken)
                taken.add(beside.casefold())
                while _edited(_read(where, beside), new, record.get(beside)):  # a .new.md the lecturer wrote in
                    beside = _beside(name, taken)
                    taken.add(beside.casefold())
                if kept is not None:
                    kept.append(f"{name} (this run's: {beside})")
                name = beside
            out.append((name, text))
            record[name] = _digest(new)
        written = write_markdown_files(folder, out)
        write_in(where, WRITTEN, json.dumps(record, indent=0, sort_keys=True).encode("utf-8"))
    finally:
        os.close(where)
    return written


def moodle_folder(row: Row) -> str | None:
    """The folder of a Moodle submission's feedback in the zip: the participant's outermost Moodle folder, as
    :func:`~bertfamily.grading.lms.find` reads it (a file named like a classmate's is hers), or the file name's start
    where the download was not in folders; ``""`` where that name holds a path or a control character (no entry);
    None where the submission is not Moodle's, or the row's student is not that participant (a file in Mallory's
    own folder named like Bob's Moodle folder is hers: it goes in no folder of Bob's)."""
    folders = ((p, MOODLE_FOLDER.match(p)) for p in Path(row.submission).parts)
    found = next((p if m.end() == len(p) else m[0] for p, m in folders if m and "_assignsubmission_file" in m[0]), None)
    match = MOODLE_FOLDER.match(found) if found is not None else None
    if found is None or match is None or not re.search(rf"(?<!\d){match['id']}(?!\d)", row.student or ""):
        return None
    return found if not re.search(r"[\\/\x00-\x1f\x7f]", found) and found.strip(". ") else ""


def write_moodle_feedback_zip(rows, exercise: Exercise, folder, policy=None) -> Path | None:
    """``folder/moodle-feedback.zip`` for Moodle's "Upload multiple feedback files in a zip": each Moodle
    submission's feedback (:func:`feedback_text`) in a folder named as Moodle's download named the participant's
    (Moodle gives each the files of its folder); None, and nothing written, where no row came from Moodle."""
    import io
    import zipfile

    from bertfamily.grading.safeio import open_folder, write_in

    entries = {}
    for r, name in feedback_files(rows):
        found = moodle_folder(r)
        if found:
            entries[f"{found}/{disk_name(name)}"] = student_bytes(feedback_text(r, exercise, policy))
    if not entries:
        return None
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry, text in sorted(entries.items()):
            archive.writestr(entry, text)
    where = open_folder(folder)
    try:
        write_in(where, "moodle-feedback.zip", data.getvalue())
    finally:
        os.close(where)
    return Path(folder) / "moodle-feedback.zip"


def stale_feedback(rows, folder, refreshed=None) -> list[str]:
    """The ``.md`` files in ``folder`` named for a student whose feedback this run wrote (``refreshed``: their
    submissions; None: every row's) that this run did not write: an earlier run's, for a file she no longer
    hands in (a draft removed before a regrade) or named for how many files she had. Named, never deleted:
    a lecturer may have added to one."""
    files = feedback_files(rows)
    current = {disk_name(name).casefold() for _, name in files}
    students = {
        disk_name(r.student) for r, _ in files if r.student and (refreshed is None or r.submission in refreshed)
    }
    try:
        present = sorted(os.listdir(folder))
    except OSError:
        return []
    return [
        n
        for n in present
        if n.endswith(".md")
        and n.casefold() not in current
        and any(n == f"{s}.md" or n.startswith(f"{s}-") for s in students)
    ]


def write_all(rows, exercise: Exercise, folder, policy=None, refreshed=None) -> tuple[list[Path], Path | None, list]:
    """The feedback files (only those of ``refreshed``, where given), Moodle's zip, and the warnings: the feedback
    files an earlier run left for those students (:func:`stale_feedback`), the Moodle submissions the zip has no
    folder for (:func:`moodle_folder`)."""
    kept: list[str] = []
    written = write_student_feedback(rows, exercise, folder, policy, only=refreshed, kept=kept)
    bundle = write_moodle_feedback_zip(rows, exercise, folder, policy)
    stale = [n for n in stale_feedback(rows, folder, refreshed) if n not in {p.name for p in written}]
    shown = ", ".join(escape_controls(n) for n in kept[:10]) + (" ..." if len(kept) > 10 else "")
    plural, zipped = len(kept) > 1, " (Moodle's feedback zip holds this run's)" if bundle else ""
    edited = (
        f"{len(kept)} feedback file{'s' * plural} changed since the grader wrote {'them' if plural else 'it'} (by "
        f"hand?), kept as {'they are' if plural else 'it is'}: {shown}; this run's feedback is beside each, in the "
        f"file named{zipped}: merge by hand, then delete that file"
        if kept
        else ""
    )
    unzipped = [escape_controls(n) for r, n in feedback_files(rows) if moodle_folder(r) == ""]
    said = (
        f"{len(unzipped)} Moodle submission{'s' * (len(unzipped) > 1)} named with a path or a control character "
        f"got no folder in Moodle's feedback zip (Moodle would not take it): upload {', '.join(unzipped[:10])} "
        f"from {escape_controls(str(folder))} by hand"
        if unzipped
        else ""
    )
    if not stale:
        return written, bundle, [w for w in (edited, said) if w]
    many = len(stale) > 1
    shown = ", ".join(escape_controls(n) for n in stale[:10]) + (" ..." if len(stale) > 10 else "")
    warning = (
        f"{len(stale)} feedback file{'s' * many} in {escape_controls(str(folder))} {'were' if many else 'was'} "
        f"written by an earlier run for the same student{'s' * many} and not by this one (a file no longer "
        f"handed in, or a name that changed with the number of files handed in: STUDENT.md for one, "
        f"STUDENT-FILE.md for each of several): {shown}; delete {'them' if many else 'it'} before passing the "
        "feedback on"
    )
    return written, bundle, [w for w in (edited, warning, said) if w]
