"""What a pool's workers are forked from (:func:`bertfamily.grading.classroom._context`).

multiprocessing's fork server imports this module once, when a class's pool first starts. First, before
any other import (which takes half a second and more, during which the grader may be killed), it ties
the server's life to the grader that started it (``PR_SET_PDEATHSIG``: a grader killed mid-class takes
the server with it, and so every worker, each tied to the server in turn, :func:`~bertfamily.grading.monitor.die_with`),
and ends at once if that grader has already ended (its pid, ``BERTFAMILY_GRADER_PID``, is no longer the
server's parent). Then it imports what scoring a row needs, the course's checks with torch and
transformers, which each worker then has without importing it again (2.5-3.5 s of CPU a worker).

Imported by nothing else: in any other process, its first lines would tie that process to its parent.
"""

import os
import signal
import sys

if sys.platform.startswith("linux"):
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    # classroom.GRADER_PID's name: importing classroom here would import everything before the tie
    if os.environ.get("BERTFAMILY_GRADER_PID", str(os.getppid())) != str(os.getppid()):
        os._exit(0)  # the grader ended before the tie was made: nothing is left to serve

import bertfamily.grading.pipeline  # noqa: E402, F401
import bertfamily.grading.verify  # noqa: E402, F401
