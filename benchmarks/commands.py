"""Running a command and timing it: its wall time and status, and the CPU time of finished children."""

from __future__ import annotations

import subprocess
import time

from benchmarks import ROOT


def timed(cmd, cwd=ROOT, timeout: int = 1800) -> dict:
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        rc, tail = done.returncode, (done.stdout + done.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        rc, tail = None, f"timed out after {timeout} s"
    wall = round(time.perf_counter() - start, 2)
    return {
        "wall_s": wall,
        "returncode": rc,
        "status": "ok" if rc == 0 else "failed",
        "output_tail": None if rc == 0 else tail,
    }


def children_cpu_s() -> float:
    """User + system CPU seconds of every finished process this one has waited for, and of theirs
    (``RUSAGE_CHILDREN``): the difference around a command is the CPU time of its whole process tree,
    a measure that does not move with the machine's load as wall time does. (A process its parent
    never waited for is not counted; the suite's kernels, sandboxes and workers are waited for.)"""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
