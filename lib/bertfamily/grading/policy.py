"""The lecturer's grading policy: each task's points (bonus tasks, partial credit per check), the
deadline, the late policy, and which of a student's submissions counts (applied by :mod:`~bertfamily.grading.counting`).

It comes from a small TOML file (``--grading grading.toml``) and the options that override it (``--deadline``,
``--late``, ``--counts``); without either, every graded task is worth one point, all or nothing. A grading file::

    [points]                        # a task left out is worth 1 point
    task1 = 2
    task3 = { points = 3, partial = true }   # each of its checks earns its share
    task7 = { points = 1, bonus = true }     # counts on top of the maximum

    [deadline]
    due = 2026-03-01T23:59:00+01:00          # a TOML date-time (with its offset), or the same as a string
    late = "penalty"                         # "none" (accepted, flagged), "penalty" or "refuse"
    penalty_percent_per_day = 10             # with "penalty": per started day late, of the points earned
    counts = "latest-before-deadline"        # or "latest", "first", "best"

    [deadline.extensions]                    # one student's own deadline (the roster's id; no roster: the file's name)
    307 = 2026-03-05T23:59:00+01:00

The policy is applied after grading (:func:`apply`): the journal keeps the raw marks, so a changed
policy rewrites the gradebook without running a single notebook again.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bertfamily.grading.counting import COUNT_WORDS, DEFAULT, mark_counted
from bertfamily.grading.exercise import Exercise, check_statements
from bertfamily.grading.lateness import check_extensions, due_of, late_words, with_extension
from bertfamily.grading.pipeline import Row

LATE_POLICIES = ("none", "penalty", "refuse")
COUNTS = ("latest-before-deadline", "latest", "first", "best")
_TASK_KEYS = {"points", "bonus", "partial"}
_DEADLINE_KEYS = {"due", "late", "penalty_percent_per_day", "counts", "extensions"}


@dataclass(frozen=True)
class TaskPoints:
    points: float = 1
    bonus: bool = False
    partial: bool = False  # each check earns points / checks; else all or nothing


@dataclass(frozen=True)
class Policy:
    tasks: dict = field(default_factory=dict)  # task name -> TaskPoints (every graded task)
    due: datetime | None = None
    late: str = "none"
    penalty_percent_per_day: float = 0.0
    counts: str = DEFAULT
    source: str = "default: 1 point a task, no deadline"
    extensions: dict = field(default_factory=dict)  # a student (id, or file name) -> their own deadline
    single: tuple = ()  # the partial tasks of one check, where partial credit changes nothing (load says so)

    @property
    def max_score(self) -> float:
        return number(sum(t.points for t in self.tasks.values() if not t.bonus))

    def describe(self) -> str:
        """The policy in one paragraph (printed after grading, and in the docs' words)."""
        parts = [
            f"points from {self.source}: "
            + ", ".join(
                f"{name} {number(t.points)}" + (" bonus" if t.bonus else "") + (" partial" if t.partial else "")
                for name, t in self.tasks.items()
            )
            + f" (maximum {number(self.max_score)})"
        ]
        if self.due:
            late = {
                "none": "late work is accepted and flagged",
                "penalty": f"late work loses {number(self.penalty_percent_per_day)}% per started day",
                "refuse": "late work earns nothing",
            }[self.late]
            parts.append(f"due {self.due.isoformat()}; {late}")
        if self.extensions:
            parts.append("extensions: " + ", ".join(f"{s} until {d.isoformat()}" for s, d in self.extensions.items()))
        parts.append(f"the submission that counts: {COUNT_WORDS[self.counts]}")
        if self.single:
            parts.append(f"partial credit changes nothing for {', '.join(self.single)}: one check, all or nothing")
        return "; ".join(parts)


def checks_of(task) -> int:
    """How many checks a task's check cells make (each ``checks.check_*`` call, a cell calling none is one)."""
    return sum(max(1, len([c for c, _ in check_statements(source) if c])) for _, source in task.checks)


def number(value):
    """A score as the gradebook writes it: an int when whole, else rounded to 2 decimals."""
    if value is None:
        return None
    value = round(float(value), 2)
    return int(value) if value == int(value) else value


def parse_time(text, what: str) -> datetime:
    """An ISO 8601 date-time with its UTC offset (``2026-03-01T23:59+01:00``, ``...Z``)."""
    if isinstance(text, datetime):
        value = text
    else:
        try:
            value = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{what}: {text!r} is not a date and time; write it as ISO 8601 with its offset, "
                "e.g. 2026-03-01T23:59:00+01:00"
            ) from None
    if value.tzinfo is None:
        raise ValueError(
            f"{what}: {text!r} has no UTC offset; add one (2026-03-01T23:59:00+01:00, or Z for UTC), "
            "so that the deadline does not depend on this machine's time zone"
        )
    return value


def _task_points(name: str, value, where: str) -> TaskPoints:
    if isinstance(value, bool) or not isinstance(value, (int, float, dict)):
        raise ValueError(
            f"{where}: {name} = {value!r}: give a number of points (task1 = 2) or a table "
            "(task1 = {{ points = 2, bonus = false, partial = true }})"
        )
    if isinstance(value, dict):
        unknown = set(value) - _TASK_KEYS
        if unknown:
            raise ValueError(
                f"{where}: {name} has {', '.join(sorted(unknown))}; a task allows {', '.join(sorted(_TASK_KEYS))}"
            )
        for key in ("bonus", "partial"):
            if not isinstance(value.get(key, False), bool):
                raise ValueError(f"{where}: {name}.{key} must be true or false, got {value[key]!r}")
        points = value.get("points", 1)
    else:
        points = value
    if isinstance(points, bool) or not isinstance(points, (int, float)) or not math.isfinite(points) or points < 0:
        raise ValueError(f"{where}: {name} must be worth a number of points, 0 or more, got {points!r}")
    extra = value if isinstance(value, dict) else {}
    return TaskPoints(points, extra.get("bonus", False), extra.get("partial", False))


def load(exercise: Exercise, path=None, *, due=None, late=None, counts=None, extensions=()) -> Policy:
    """The policy of a run: the grading file at ``path`` (if any), then the options, checked against the
    exercise's graded tasks; a mistake is a ValueError that says what is allowed. ``extensions``: the
    ``--extension STUDENT=WHEN`` options, over the grading file's ``[deadline.extensions]``."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10 has no tomllib: the same parser as tomli (the grader and test extras install it there)
        import tomli as tomllib

    graded = [t.name for t in exercise.graded]
    data, where = {}, "the options"
    if path is not None:
        where = str(path)
        if not Path(path).is_file():
            raise ValueError(f"no grading file at {path}")
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(
                f"{path} is not TOML ({exc}); see the example in docs (a [points] table and a [deadline] table)"
            ) from None
    unknown = set(data) - {"points", "deadline"}
    if unknown:
        raise ValueError(
            f"{where}: unknown table {', '.join(sorted(unknown))}; a grading file has [points] and [deadline]"
        )
    points = data.get("points", {})
    if not isinstance(points, dict):
        raise ValueError(f"{where}: points must be a table ([points] then task1 = 2 ...)")
    others = set(points) - set(graded)
    if others:
        ungraded = {t.name for t in exercise.tasks} - set(graded)
        said = [
            f"{n} is not graded (its result depends on the machine)"
            if n in ungraded
            else f"{n} belongs under [deadline], not [points]"
            if n in _DEADLINE_KEYS
            else f"no task {n}"
            for n in sorted(others)
        ]
        raise ValueError(f"{where}: {'; '.join(said)}; the graded tasks are {', '.join(graded)}")
    tasks = {name: _task_points(name, points[name], where) if name in points else TaskPoints() for name in graded}
    deadline = data.get("deadline", {})
    if not isinstance(deadline, dict) or set(deadline) - _DEADLINE_KEYS:
        raise ValueError(f"{where}: [deadline] allows {', '.join(sorted(_DEADLINE_KEYS))}")
    due = due if due is not None else deadline.get("due")
    late = late if late is not None else deadline.get("late", "none")
    penalty = deadline.get("penalty_percent_per_day", 0)
    if isinstance(late, str) and late.startswith("penalty:"):  # --late penalty:10
        late, penalty = "penalty", late.split(":", 1)[1].rstrip("%")
        try:
            penalty = float(penalty)
        except ValueError:
            raise ValueError(f"--late penalty:N needs a percentage per day, e.g. penalty:10, got {penalty!r}") from None
    if late not in LATE_POLICIES:
        raise ValueError(
            f"{where}: late = {late!r}; allowed: none (accepted, flagged), penalty (with "
            "penalty_percent_per_day, or --late penalty:10), refuse (late work earns nothing)"
        )
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not 0 <= penalty <= 100:
        raise ValueError(f"{where}: penalty_percent_per_day must be a number from 0 to 100, got {penalty!r}")
    if late in ("none", "refuse") and deadline.get("late") == late and deadline.get("penalty_percent_per_day"):
        raise ValueError(
            f'{where}: penalty_percent_per_day counts only with late = "penalty" (here late = "{late}"): '
            'set late = "penalty", or remove the percentage'
        )
    if late == "penalty" and not penalty:
        raise ValueError(f"{where}: late = \"penalty\" needs penalty_percent_per_day (or --late penalty:10)")
    counts = counts if counts is not None else deadline.get("counts", COUNTS[0])
    if counts not in COUNTS:
        raise ValueError(f"{where}: counts = {counts!r}; allowed: {', '.join(COUNTS)}")
    due = parse_time(due, f"{where}: the deadline") if due is not None else None
    if late != "none" and due is None:
        raise ValueError(f"a late policy ({late}) needs a deadline: --deadline or due in [deadline]")
    given = deadline.get("extensions", {})
    if not isinstance(given, dict):
        raise ValueError(f"{where}: [deadline.extensions] is a table: a student = their deadline")
    for option in extensions:
        student, sep, when = str(option).partition("=")
        if not sep or not student.strip():
            raise ValueError(f"--extension {option!r}: write STUDENT=WHEN, e.g. --extension 307=2026-03-05T23:59+01:00")
        given = {**given, student.strip(): when.strip()}
    moved = {str(s): parse_time(d, f"{where}: the extension of {s}") for s, d in given.items()}
    if moved and due is None:
        raise ValueError("an extension needs a deadline to extend: --deadline or due in [deadline]")
    early = sorted(s for s, d in moved.items() if d <= due)
    if early:
        raise ValueError(
            f"the extension of {', '.join(early)} is not after the deadline ({due.isoformat()}): an "
            "extension gives a later deadline"
        )
    source = str(path) if path is not None else "the default: 1 point a task"
    single = tuple(t.name for t in exercise.graded if tasks[t.name].partial and checks_of(t) < 2)
    return Policy(tasks, due, late, float(penalty), counts, source, moved, single)


def handout_points(exercise: Exercise, policy: Policy) -> dict:
    """Task number -> what the handout's heading says it is worth ("2 points", "1 point, bonus",
    "3 points, partial credit per check", "not graded"); 0 -> the deadline and what late work costs, if any."""
    late = {"none": "late work is accepted, marked late", "refuse": "late work scores 0"}.get(policy.late)
    late = late or f"late work loses {number(policy.penalty_percent_per_day)}% per started day"
    said = {0: f"Due {policy.due.isoformat(sep=' ', timespec='minutes')}; {late}."} if policy.due else {}
    for number_, task in enumerate(exercise.tasks, 1):
        t = policy.tasks.get(task.name)
        if t is None:
            said[number_] = "not graded: its result depends on the machine"
            continue
        words = [f"{number(t.points)} point{'' if t.points == 1 else 's'}"]
        words += ["bonus"] * t.bonus + ["partial credit per check"] * (t.partial and checks_of(task) > 1)
        said[number_] = ", ".join(words)
    return said


# --------------------------------------------------------------------------- applying it


def reference_checks(exercise: Exercise) -> dict:
    """How many ✓ lines each graded task's check cells print in the reference: the denominator of
    partial credit (a check that never ran earns nothing, but still counts)."""
    from bertfamily.grading.marks import MARK_LINE, output_text

    found = {}
    by_id = {c.get("id"): c for c in exercise.reference.cells}
    for task in exercise.graded:
        found[task.name] = sum(
            1 for cid, _ in task.checks for line in output_text(by_id[cid]).splitlines() if MARK_LINE.match(line)
        )
    return found


def task_points(row: Row, policy: Policy, totals: dict) -> dict:
    """Each graded task's points earned by ``row`` (None where it was not graded)."""
    earned: dict[str, float | None] = {}
    for name, t in policy.tasks.items():
        mark = row.tasks.get(name)
        if mark is None:
            earned[name] = None
        elif t.partial and not mark and name in row.checks and row.checks[name].get("partial", True):
            passed = len(row.checks[name].get("passed", ()))
            total = max(totals.get(name) or 0, passed + len(row.checks[name].get("failed", ())), 1)
            earned[name] = number(t.points * passed / total)
        else:
            earned[name] = number(t.points * mark)
    return earned


def apply(rows, policy: Policy, exercise: Exercise) -> list[Row]:
    """The rows with the policy applied: each task's points and the weighted score, each late row
    flagged (and penalised or refused as the policy says), and ``counts`` saying for each student's
    submission whether it is the one that counts (and why not)."""
    totals = reference_checks(exercise)
    check_extensions(policy.extensions, {r.submission: r.student for r in rows if r.submission or r.student})
    out = []
    for r in rows:
        r = dataclasses.replace(r, tasks=dict(r.tasks), max_score=policy.max_score)
        if r.status == "missing":
            out.append(r)
            continue
        if r.score is not None:
            r.tasks = task_points(r, policy, totals)
            r.score = number(sum(v for v in r.tasks.values() if v is not None))
        r.time_from, late = with_extension(r, policy.due, due_of(r, policy.extensions, policy.due))
        if late is not None:
            words = late_words(late, r)
            if policy.late == "refuse" and r.score is not None:
                words += f": refused, scores 0 (it earned {r.score})"
                r.score = 0
            elif policy.late == "penalty" and r.score is not None:
                days = max(1, math.ceil(late.total_seconds() / 86400))
                cut = min(100.0, policy.penalty_percent_per_day * days)
                before = r.score
                r.score = number(r.score * (1 - cut / 100))
                words += f": -{number(cut)}% ({days} started day{'s' * (days > 1)}), {before} → {r.score}"
            r.late = words
        out.append(r)
    return mark_counted(out, policy.counts)


def one_file(row: Row, policy: Policy | None, exercise: Exercise) -> tuple[Row, list[str]]:
    """``grade NOTEBOOK``'s row in the grading file's points; a note where the file sets a deadline (the class's)."""
    if policy is None:
        return row, []
    plain = dataclasses.replace(policy, due=None, extensions={})  # no hand-in time here: the points alone
    return apply([dataclasses.replace(row, submitted="")], plain, exercise)[0], [] if policy.due is None else [
        "note: the grading file's deadline is not applied to one notebook: bertfamily-grade applies it to the class, "
        "from each hand-in time and the extensions it was given, so a late student's row there may score less"
    ]


def utc(ts: float) -> str:
    """A file time (seconds) as the gradebook writes it: ISO 8601 in UTC, to the second."""
    return datetime.fromtimestamp(int(ts), timezone.utc).isoformat()
