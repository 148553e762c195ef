"""One submission, end to end, as a list of stages: the file's bytes -> read and repaired
(:mod:`~bertfamily.grading.submission`) -> the prepared copy -> a sealed run
(:mod:`~bertfamily.grading.sandbox`) -> the grader's own check and the marks
(:mod:`~bertfamily.grading.scoring`) -> one :class:`Row`. Every executor of a class (the local pool,
a Dask cluster) calls :func:`grade_submission` for each file; a run that could not be made has one
shape, :func:`error_row`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from bertfamily.grading.channel import exports
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.monitor import Limits
from bertfamily.grading.mounts import SandboxMissing
from bertfamily.grading.safeio import read_regular
from bertfamily.grading.sandbox import run_sandboxed
from bertfamily.grading.scoring import REPRODUCED, score_run
from bertfamily.grading.submission import (
    MAX_NOTEBOOK_BYTES,
    Invalid,
    link_problem,
    prepare,
    printable,
    read_submission,
)

STATUSES = ("graded", "invalid", "timeout", "error", "missing")
#: Where a model came from is not compared: a student online saw "loaded ... from the Hugging Face
#: hub", the grader (offline) prints "no model hub here: built ..." (bertfamily.models.load_pretrained).
#: The exercise's own line (bertfamily.models.exercise_source) says the same for the transformers code
#: students write.
MODEL_SOURCE = (
    r"(loaded \S+ from the Hugging Face hub \(pretrained weights\)|the Hugging Face hub is "
    r"reachable: [^\n]*|(the hub was reachable but the download failed \(\w+\); )?no model hub "
    r"here: [^\n]*)",
    "MODEL SOURCE",
)


@dataclass
class Row:
    """One line of the gradebook."""

    submission: str
    status: str
    score: int | None
    max_score: int
    tasks: dict
    detail: str
    outputs: str = ""  # whether the stored outputs reproduced, per task where they did not
    flags: str = ""  # what the instructor should look at: forged or typed answers, tampering code
    student: str = ""  # the roster's id, with --roster
    read_by_hand: str = ""  # free-text answers for the instructor (never scored)
    feedback: dict = field(default_factory=dict, compare=False)  # task -> ✗ lines and hints
    # the lecturer's policy (bertfamily.grading.policy, lms): each check's verdict, when and how late
    checks: dict = field(default_factory=dict, compare=False)  # task -> {"passed": [...], "failed": [...]}
    submitted: str = ""  # ISO 8601, when it was handed in (from time_from)
    time_from: str = ""  # where that time came from: the LMS's worksheet, the file's mtime; LATE: its mark
    late: str = ""  # "late by 1 d 2 h 3 min: -10% ..." (policy.apply)
    counts: str = ""  # "yes", or "no: which submission of the student counts instead"


def sanitizers(path: str | Path | None = None) -> str:
    """The nbval sanitize file of a run: the grader's own pattern first, then those of the file at
    ``path`` (``--sanitize``; the course's is ``tests/sanitize.cfg``, the one ``make test`` uses).
    None: the grader's own pattern alone (outputs are compared as printed)."""
    regex, replace = MODEL_SOURCE
    own = f"[grading-model-source]\nregex: {regex}\nreplace: {replace}\n\n"
    if path is None:
        return own
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no nbval sanitize file at {path}: pass --sanitize FILE")
    return own + path.read_text(encoding="utf-8")


def error_row(display: str, exercise: Exercise, detail: str, flags: str = "") -> Row:
    """The row of a submission the grader could not grade to the end (the grader failed on it, or the
    worker grading it died twice): no score, no marks, and why."""
    names = [t.name for t in exercise.graded]
    return Row(display, "error", None, len(names), dict.fromkeys(names), detail, flags=flags)


def _outputs_text(outputs: dict) -> str:
    if not outputs:
        return ""
    if all(v == REPRODUCED for v in outputs.values()):
        return REPRODUCED
    return "; ".join(f"{task}: {v}" for task, v in outputs.items() if v != REPRODUCED)


def without_outputs(nb) -> bytes:
    """The student's notebook as its kernel may read it (as its own file, in its working folder): the
    cells as handed in, without their stored outputs, execution counts and attachments. The outputs are
    what a re-run must reproduce; a run that could read them could print them back, answers and all."""
    bare = copy.deepcopy(nb)
    for cell in bare.cells:
        cell.pop("attachments", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nbformat.writes(bare).encode("utf-8")


def grade_submission(
    path, display: str, exercise: Exercise, limits: Limits, sanitize: str, strict_outputs: bool = False
) -> Row:
    """Grade one submitted file (only read, never written): its gradebook row."""
    empty = dict.fromkeys((t.name for t in exercise.graded), None)
    max_score = len(exercise.graded)
    try:
        link = link_problem(path)
        if link:
            raise Invalid(link)
        try:  # a regular file, no larger than the cap, checked before it is read; a FIFO never blocks
            data = read_regular(path, MAX_NOTEBOOK_BYTES)
        except ValueError as exc:
            raise Invalid(f"not graded: {exc}") from None
        repairs: list[str] = []
        nb = read_submission(data, exercise.tasks, exercise.name, repairs)
    except (Invalid, OSError) as exc:
        reason = str(exc) if isinstance(exc, Invalid) else f"cannot read the file ({exc.strerror})"
        return Row(display, "invalid", None, max_score, empty, reason)
    try:
        prepared = prepare(nb, exercise)
        prepared.notes[:0] = [(None, what) for what in repairs]
        # the name the kernel sees: bytes that are not UTF-8 (a zip of Latin-1 names) as ``\xff``
        run = run_sandboxed(
            prepared.nb,
            limits,
            sanitize,
            exports(exercise),
            without_outputs(nb),
            printable(Path(path).name),
            hidden=exercise.folder,
        )
        s = score_run(prepared, exercise, run, limits, strict_outputs)
    except SandboxMissing:
        raise
    except Exception as exc:  # one submission never stops the class: its row says what went wrong
        why = f"{type(exc).__name__}: {exc}".strip()[:200]
        return error_row(
            display,
            exercise,
            f"error: the grader failed on this submission ({why})",
            flags=f"read by hand: the grader failed on it ({type(exc).__name__})",
        )
    return Row(
        display,
        s.status,
        sum(s.marks.values()),
        max_score,
        s.marks,
        "; ".join(s.problems + s.notes),
        _outputs_text(s.outputs),
        "; ".join(s.flags),
        feedback=s.feedback,
        read_by_hand="; ".join(s.read_by_hand),
        checks=s.checks,
    )
