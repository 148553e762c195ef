"""Which of a student's submissions counts, as the grading policy's ``counts`` says
(:class:`~bertfamily.grading.policy.Policy`): each row's ``counts`` column ("yes", or "no: ..." naming the one that
counts and why), and the row of each student that the LMS files grade (:func:`counted_rows`)."""

from __future__ import annotations

from bertfamily.grading.pipeline import Row
from bertfamily.grading.textsafe import relative_names

#: What a submission's ``counts`` says where another of the student's had the same time (the command looks for it).
TIE = "the tie goes to the higher score (then the name that sorts last), check which the student meant"
COUNT_WORDS = {
    "latest-before-deadline": "the latest before the deadline (else the latest, late)",
    "latest": "the latest",
    "first": "the first",
    "best": "the best score (after any late penalty)",
}
DEFAULT = "latest-before-deadline"  # the policy's default (Policy.counts)


def _when(r: Row) -> str:
    return r.submitted or ""


def mark_counted(rows, counts: str) -> list[Row]:
    """Set ``counts`` on every row with a student: "yes", or "no: ..." saying which counts instead, as ``counts``
    (one of :data:`COUNT_WORDS`) says."""
    by_student: dict[str, list[Row]] = {}
    for r in rows:
        if r.student and r.status != "missing":
            by_student.setdefault(r.student, []).append(r)
    for mine in by_student.values():
        if len(mine) == 1:
            mine[0].counts = "yes"
            continue
        chosen, named = choose(mine, counts), relative_names(r.submission for r in mine)  # read by the student
        why = COUNT_WORDS[counts]
        tied = [r for r in mine if r is not chosen and r.status != "invalid" and _when(r) == _when(chosen)]
        if tied and counts != "best":  # one time for both (Moodle's worksheet has one a participant)
            why += f"; {' and '.join(named[r.submission] for r in [chosen, *tied])} have one time: {TIE}"
        for r in mine:
            r.counts = "yes" if r is chosen else f"no: {named[chosen.submission]} counts ({why})"
    return rows


def choose(mine: list, counts: str) -> Row:
    """The one of a student's submissions that counts, by the stated policy (never the best silently:
    only ``counts = "best"`` looks at the scores). A file that could not be read (``invalid``) never
    replaces a readable one. Files with the same time (handed in together: Moodle's worksheet, Canvas's one
    submission of two files) are one hand-in: of them, the higher score counts, then the later name (a draft
    handed in beside the final notebook does not replace it). ``counts``: one of :data:`COUNT_WORDS`."""
    timed = sorted([r for r in mine if r.status != "invalid"] or mine, key=lambda r: (_when(r), r.submission))
    if counts == "best":
        return max(timed, key=_score)
    pool = timed if counts in ("first", "latest") else ([r for r in timed if not r.late] or timed)
    pick = pool[0] if counts == "first" else pool[-1]
    return max((r for r in pool if _when(r) == _when(pick)), key=lambda r: (_score(r), r.submission))


def _score(r: Row) -> float:
    return -1 if r.score is None else float(r.score)


def counted_rows(rows) -> dict:
    """student -> the row that counts (the LMS files' grade); rows without ``counts`` set (a caller
    that applied no policy) are chosen by the default policy."""
    found: dict[str, Row] = {}
    loose: dict[str, list[Row]] = {}
    for r in rows:
        if not r.student or r.status == "missing":
            continue
        if r.counts == "yes":
            found[r.student] = r
        elif not r.counts:
            loose.setdefault(r.student, []).append(r)
    for student, mine in loose.items():
        found.setdefault(student, choose(mine, DEFAULT))
    return found
