"""Every local run keeps a journal, and a regrade updates a class in place.

:class:`Journaled` wraps the local executor (:class:`~bertfamily.grading.classroom.LocalPool`) with the
journal a cluster run keeps (:class:`~bertfamily.grading.journal.Journal`, ``OUT.journal`` beside the
gradebook): each finished row is on disk as it comes, so a run stopped by Ctrl-C (or a crash) resumes
with ``--resume`` and grades only the rest. The journal holds the raw rows (before the lecturer's
points, deadline and roster are applied), so it is also what a regrade starts from: ``--regrade alice``
grades alice's files again, takes every other row from the journal as it is, and writes the gradebook,
the LMS files and alice's feedback again; every other line of them comes out byte for byte the same.
"""

from __future__ import annotations

import sys

from bertfamily.grading.classroom import ClassSettings
from bertfamily.grading.fingerprints import fingerprint
from bertfamily.grading.journal import Interrupted, Journal, journal_path, run_settings
from bertfamily.grading.pipeline import Row, grade_submission
from bertfamily.grading.safeio import regular_digest
from bertfamily.grading.submission import MAX_NOTEBOOK_BYTES, link_problem


class Journaled:
    """``inner`` (a :class:`~bertfamily.grading.classroom.LocalPool`) with the journal beside ``out``.

    ``resume``: keep the journal's rows of unchanged files and grade the rest. ``regrade`` (a set of
    submissions): keep the journal's row of every other submission as it is (a file changed since is
    said, not graded), and grade these again."""

    def __init__(self, inner, out, *, resume: bool = False, force: bool = False, regrade=None):
        self.inner, self.out, self.resume, self.force = inner, out, resume, force
        self.regrade = None if regrade is None else set(regrade)
        self.stale: list[str] = []  # files changed since their journal row, kept as they were (regrade)
        self.unseen: list[str] = []  # files in no row of the journal, graded though not named (regrade)

    def said(self) -> list[str]:
        """The warnings of a regrade: the files it kept as they were though they changed, and those it graded
        though not named, as new to the journal (the same files downloaded again into another folder?)."""
        kept = [
            f"{name} changed since it was graded; its row is kept as it was (name it in --regrade to grade it again)"
            for name in self.stale
        ]
        if self.unseen:
            many = len(self.unseen) > 1
            names = ", ".join(self.unseen[:5]) + (" ..." if len(self.unseen) > 5 else "")
            kept.append(
                f"{len(self.unseen)} submission{'s' * many} in no row of the journal of --out "
                f"{'were' if many else 'was'} graded too, though not named in --regrade: {names} (new files; or the "
                "class downloaded again into another folder? A journal knows each file by its path: give the folder "
                "graded first)"
            )
        return kept

    def grade(self, found: list, settings: ClassSettings, progress: bool) -> list[Row]:
        path = journal_path(self.out)
        if self.regrade is not None and not path.is_file():
            raise ValueError(
                f"--regrade updates a class graded before: no journal {path} beside --out (grade the "
                "class once with this version, then regrade)"
            )
        keep = self.resume or self.regrade is not None
        existed = path.exists()
        journal = Journal.open(
            path,
            run_settings(settings.exercise, settings.limits, settings.sanitize, settings.strict_outputs, fingerprint()),
            keep,
            self.force,
        )
        by_name = {display: (digest, row) for (display, digest), row in journal.rows.items()}
        try:
            rows, todo, digests = [], [], {}
            for file, display in found:
                digest = regular_digest(file, MAX_NOTEBOOK_BYTES)  # a FIFO, a link, a sparse TiB: None
                digests[display] = digest
                if digest is None or link_problem(file) is not None:
                    rows.append(grade_submission(*settings.args(file, display)))  # the grader's own row, no run
                elif self.regrade is not None and display not in self.regrade and display in by_name:
                    rows.append(by_name[display][1])
                    if by_name[display][0] != digest:
                        self.stale.append(display)
                elif (self.regrade is None or display not in self.regrade) and (display, digest) in journal.rows:
                    rows.append(journal.rows[(display, digest)])
                else:
                    if self.regrade is not None and display not in self.regrade:
                        self.unseen.append(display)
                    todo.append((file, display))
            if self.resume and rows:
                print(
                    f"resuming: {len(rows)} of {len(found)} submissions already graded ({journal.path})",
                    file=sys.stderr,
                )

            def journaled(row: Row) -> None:  # each row as it is made: an interrupted run keeps it
                digest = digests.get(row.submission)
                if digest:
                    journal.add(digest, row)

            self.inner.on_row = journaled
            try:
                if todo:
                    rows += self.inner.grade(todo, settings, progress)
            except KeyboardInterrupt:
                done = len(journal.rows)
                raise Interrupted(
                    f"interrupted (Ctrl-C): {done} of {len(found)} submissions graded, kept in {journal.path}; no "
                    f"gradebook written. The same command with --resume grades the other {len(found) - done} and "
                    f"writes {self.out}."
                ) from None
        finally:
            journal.close()
            if not existed and not journal.rows:  # a run that graded nothing (its probe failed) leaves no file
                path.unlink(missing_ok=True)
        return rows


def select(names, found, owners: dict) -> set[str]:
    """The submissions that ``names`` (students' ids, or submissions by their path or file name) mean;
    a name that means nothing is an error that lists what would."""
    wanted, unknown = set(), []
    for name in names:
        hits = {f.display for f in found if name in (f.display, f.path.name, owners.get(f.display))}
        if not hits:
            unknown.append(name)
        wanted |= hits
    if unknown:
        students = sorted({s for s in owners.values() if s})
        raise ValueError(
            f"--regrade {', '.join(unknown)}: no such student or submission; the students are "
            f"{', '.join(students[:20]) or '(none: give the submissions by name)'}"
            + (" ..." if len(students) > 20 else "")
        )
    return wanted
