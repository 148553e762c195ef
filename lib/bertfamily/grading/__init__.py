"""Grading the exercise: the student version, and regrading an untrusted class, sealed, fairly and tamper-evidently.

The flow of one submission, and where each step lives (each module imports only from the lines above
its own; tests/test_grading_layers.py keeps it so):

``exercise``      what a class is graded on: the reference notebook and its tasks
``student``       the student version of it (``make student``); ``marks`` reads the checks' ✓ / ✗ lines
                  (the student's self-check, which is not a grade)
``submission``    a file -> read (repaired first, then validated), recognised, prepared into the copy that runs
``channel``       what crosses the sandbox's wall: the exporter going in, the answers (JSON) coming out
``hub``           the course's models served offline under their hub names, in every run
``trees``         any file tree a run leaves, measured and deleted without recursion
``nbval_worker``  the child process that runs the copy under nbval, and its bounded record
``monitor``       the run's limits, and the watcher of those the kernel does not enforce
``mounts``        the sandbox's walls: bubblewrap's mounts and namespaces, the kernel's copy of the course
``sandbox``       one sealed run (and the probe run before a class)
``verify``        the grader's own check of the answers, outside the kernel; ``integrity`` reads the student's code
                  (its tables: ``denylist``; ``literals``: which answers are typed rather than computed;
                  ``magics``: the code IPython's magics run; ``causes``: which task an answer that was never
                  defined comes from, and the answers typed)
``scoring``       marks, reproduction and flags of one run; ``copies``: copies of the reference or of a classmate
``pipeline``      one submission, end to end, into one gradebook row
``policy``        the lecturer's points (bonus, partial credit), deadline, late policy; ``counting``: which of a
                  student's submissions counts
``classroom``     a class: one ``grade_class``, its executors (``LocalPool`` here; ``cluster.DaskCluster``);
                  ``preload``: what a ``LocalPool``'s workers are forked from
``gradebook``     what the instructor gets: the gradebook, roster, feedback, summary
``lms``           Canvas's and Moodle's exports as they come: whose each file is, when; ``folders``: a folder per
                  student; ``moodle``: its worksheet; ``canvas``: its export's column and points, its import file
``feedbackfiles`` the students' feedback files, named by student; Moodle's feedback zip; an earlier run's left over
``fingerprints``, ``journal``, ``cluster``   grading on a Dask cluster
``regrade``       the journal of a local run (``--resume``) and the regrade in place (``--regrade``)
``cli``           ``bertfamily-grade``, ``python -m bertfamily.grading student|grade|self-check``

The names of :data:`_WHERE` are the package's interface (as before the re-cut).
"""

import importlib

import bertfamily.imports  # noqa: F401  (before nbformat: 2 s less per process, bertfamily.imports says why)

#: Where each name of the package's interface lives. They are imported when first used, so that a
#: process that needs one module (the nbval worker of a run) does not import the others (torch).
_WHERE = {
    'main': 'cli',
    'Exercise': 'exercise',
    'Invalid': 'submission',
    'Prepared': 'submission',
    'Task': 'exercise',
    'exercise_tasks': 'exercise',
    'prepare': 'submission',
    'read_submission': 'submission',
    'MODEL_SOURCE': 'pipeline',
    'STATUSES': 'pipeline',
    'Row': 'pipeline',
    'sanitizers': 'pipeline',
    'apply_roster': 'gradebook',
    'collect': 'classroom',
    'feedback_markdown': 'gradebook',
    'grade_class': 'classroom',
    'copy_flags': 'copies',
    'LocalPool': 'classroom',
    'grade_submission': 'pipeline',
    'gradebook_fields': 'gradebook',
    'read_roster': 'gradebook',
    'summary': 'gradebook',
    'write_canvas': 'canvas',
    'write_feedback': 'gradebook',
    'write_gradebook': 'gradebook',
    'CheckResult': 'marks',
    'execute_copy': 'marks',
    'self_check': 'marks',
    'grade_notebook': 'classroom',
    'report': 'marks',
    'Limits': 'monitor',
    'place_independent': 'nbval_worker',
    'run_sandboxed': 'sandbox',
    'sandbox_env': 'mounts',
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
