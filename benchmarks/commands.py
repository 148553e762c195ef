"""Running a command and timing it: its wall time and status, and the CPU time of its processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

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
    (``RUSAGE_CHILDREN``). Around a command it undercounts: a process whose parent never waits for it
    is left out, and the grader's sandboxes (their own PID namespace) and Chromium's helpers are such
    processes (process accounting of one ``make test``: 887 s counted so, 1,114 s in all).
    :class:`CpuMeter` counts them; this is its measure where no cgroup can be made."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: cgroup v1's CPU accounting controller (FACTS §9: v1 groups can be made as root; v2 is not mounted here).
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def cgroup_can_be_made(root: Path = CPUACCT) -> bool:
    return root.is_dir() and os.access(root, os.W_OK)


def current_group(root: Path = CPUACCT) -> Path:
    """This process's cpuacct group (cgroup v1: a group's usage holds its subgroups')."""
    for line in Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return root / path.lstrip("/")
    return root


class CpuMeter:
    """The CPU seconds of a command and of every process it starts, however far they go from it.

    Where ``CPUACCT`` is writable (root, cgroup v1), the command runs in a cgroup of its own, which
    every descendant inherits whatever becomes of its parent: ``seconds()`` is the group's
    ``cpuacct.usage``, and ``measure`` says ``"cgroup"``. Elsewhere ``seconds()`` is the difference of
    :func:`children_cpu_s` around the command (``measure``: ``"waited-for processes"``, an undercount).
    Pass ``preexec`` to ``subprocess.run(preexec_fn=...)``: the child joins the group before it execs.
    """

    def __init__(self, root: Path | None = None):
        self.group: Path | None = None
        self.measure = "waited-for processes"
        with contextlib.suppress(OSError):
            root = root or current_group()  # inside the group that counts this process, if one does (make bench)
            if cgroup_can_be_made(root):
                group = root / f"bertfamily-bench-{os.getpid()}-{time.monotonic_ns()}"
                group.mkdir()
                self.group, self.measure = group, "cgroup"
        self._start = children_cpu_s()

    def preexec(self) -> None:
        if self.group is not None:
            (self.group / "cgroup.procs").write_text(str(os.getpid()), encoding="ascii")

    def seconds(self) -> float:
        if self.group is None:
            return self.waited_seconds()
        return int((self.group / "cpuacct.usage").read_text(encoding="ascii")) / 1e9

    def waited_seconds(self) -> float:
        """The processes waited for only, as ``time make test`` counts them (:func:`children_cpu_s`)."""
        return children_cpu_s() - self._start

    def join(self) -> None:
        """Move this process (and so every process it starts from now on) into the group."""
        self.preexec()

    def close(self) -> None:
        """Remove the group and the subgroups its processes made (a process of the command still alive
        keeps its group, which is left as it is)."""
        if self.group is not None:
            for group in sorted((p for p in self.group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    group.rmdir()
            with contextlib.suppress(OSError):
                self.group.rmdir()
