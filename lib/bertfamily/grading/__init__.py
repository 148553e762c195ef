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

The names of :data:`_WHERE` are the package's interface (as before the split).
"""
import importlib

#: Where each name of the package's interface lives. They are imported when first used, so that a
#: process that needs one module (the nbval worker of a run) does not import the others (torch).
_WHERE = {
    'main': 'cli',
    'REFERENCE': 'exercise',
    'Exercise': 'exercise',
    'Invalid': 'exercise',
    'Prepared': 'exercise',
    'Task': 'exercise',
    'exercise_tasks': 'exercise',
    'prepare': 'exercise',
    'read_submission': 'exercise',
    'MODEL_SOURCE': 'gradebook',
    'SANITIZE': 'gradebook',
    'STATUSES': 'gradebook',
    'Row': 'gradebook',
    '_sanitizers': 'gradebook',
    'apply_roster': 'gradebook',
    'collect': 'gradebook',
    'feedback_markdown': 'gradebook',
    'grade_class': 'gradebook',
    'grade_submission': 'gradebook',
    'gradebook_fields': 'gradebook',
    'read_roster': 'gradebook',
    'summary': 'gradebook',
    'write_canvas': 'gradebook',
    'write_feedback': 'gradebook',
    'write_gradebook': 'gradebook',
    'CheckResult': 'marks',
    'execute_copy': 'marks',
    'grade': 'marks',
    'report': 'marks',
    'Limits': 'sandbox',
    'place_independent': 'sandbox',
    'run_sandboxed': 'sandbox',
    'sandbox_env': 'sandbox',
    'Score': 'scoring',
    'score_run': 'scoring',
    'answers': 'student',
    'model_answer': 'student',
    'placeholder': 'student',
    'restore_solutions': 'student',
    'student_version': 'student',
    'write_student': 'student',
}

__all__ = [n for n in _WHERE if not n.startswith("_")]


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"bertfamily.grading.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bertfamily.grading' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
