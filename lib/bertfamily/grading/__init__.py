"""Grading the exercise: the student version, and regrading an untrusted class, sealed, fairly and tamper-evidently.

One idea per module:

``student``    the student version of a solution notebook (``make student``), solutions put back
``marks``      reading the checks' ✓ / ✗ lines; ``grade`` one notebook
``exercise``   the tasks of the reference, reading a submission, the repaired copy that runs
``sandbox``    one run: nbval outside, the kernel sealed in bubblewrap, watched for time, memory, processes
``verify``     the grader's own check of the answers the kernel sent, outside the kernel
``integrity``  what the instructor should read: code reaching for the grader, answers typed as numbers
``scoring``    marks, reproduction and flags of one run
``gradebook``  a class: grading in parallel, the gradebook, roster, Canvas export, feedback
``cli``        ``bertfamily-grade``, ``python -m bertfamily.grading student|grade``

The names below are the package's interface (as before the split).
"""
from bertfamily.grading.cli import main
from bertfamily.grading.exercise import (
                                         REFERENCE,
                                         Exercise,
                                         Invalid,
                                         Prepared,
                                         Task,
                                         exercise_tasks,
                                         prepare,
                                         read_submission,
)
from bertfamily.grading.gradebook import (
                                         MODEL_SOURCE,
                                         SANITIZE,
                                         STATUSES,
                                         Row,
                                         _sanitizers,  # noqa: F401  (the tests read it)
                                         apply_roster,
                                         collect,
                                         feedback_markdown,
                                         grade_class,
                                         grade_submission,
                                         gradebook_fields,
                                         read_roster,
                                         summary,
                                         write_canvas,
                                         write_feedback,
                                         write_gradebook,
)
from bertfamily.grading.marks import CheckResult, execute_copy, grade, report
from bertfamily.grading.sandbox import Limits, place_independent, run_sandboxed, sandbox_env
from bertfamily.grading.scoring import Score, score_run
from bertfamily.grading.student import (
                                         answers,
                                         model_answer,
                                         placeholder,
                                         restore_solutions,
                                         student_version,
                                         write_student,
)

__all__ = ["main", "REFERENCE", "Exercise", "Invalid", "Prepared", "Task", "exercise_tasks", "prepare",
           "read_submission", "MODEL_SOURCE", "SANITIZE", "STATUSES", "Row", "apply_roster", "collect",
           "feedback_markdown", "grade_class", "grade_submission", "gradebook_fields", "read_roster", "summary",
           "write_canvas", "write_feedback", "write_gradebook", "CheckResult", "execute_copy", "grade", "report",
           "Limits", "place_independent", "run_sandboxed", "sandbox_env", "Score", "score_run", "answers",
           "model_answer", "placeholder", "restore_solutions", "student_version", "write_student"]
