"""What a pool's workers are forked from (:func:`bertfamily.grading.classroom._context`).

multiprocessing's fork server imports this module once, when a class's pool first starts: it ties the
server's life to the grader that started it (``PR_SET_PDEATHSIG``, :func:`~bertfamily.grading.monitor.die_with_parent`:
a grader killed mid-class takes the server with it, and so every worker, each tied to the server in turn),
then imports what scoring a row needs, the course's checks with torch and transformers, which each worker
then has without importing it again (2.5-3.5 s of CPU a worker).

Imported by nothing else: in any other process, its first line would tie that process to its parent.
"""

from bertfamily.grading.monitor import die_with_parent

die_with_parent()

import bertfamily.grading.pipeline  # noqa: E402, F401
import bertfamily.grading.verify  # noqa: E402, F401
