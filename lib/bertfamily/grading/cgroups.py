"""Kernel-enforced memory and process limits for a run, where the machine delegates a cgroup v2 tree.

Where the grader runs in a leaf of a cgroup v2 tree whose parent it may write to, with the ``memory``
and ``pids`` controllers enabled for that parent's children (a delegated tree: ``systemd-run --user
-p Delegate=yes``, a container with its own cgroup namespace set up so), each run gets a group of its
own beside the grader's: ``memory.max`` (the run's memory and its files, which live in memory),
``memory.swap.max`` 0, ``pids.max``, and the whole group is killed at once when it runs out of memory.
Where v2 is not delegated but the cgroup v1 ``memory`` and ``pids`` hierarchies are writable (root
on the grading machines and CI), :mod:`~bertfamily.grading.cgroupv1` holds the same limits; only
where neither is (a laptop without root) is the watcher's sampling the only limit. With a group, the
watcher reads its counters (its cost does not grow with what the run holds) to say which limit a
stopped run passed.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def own_group(root: Path = ROOT, proc: str = "/proc/self/cgroup") -> Path | None:
    """The folder of this process's cgroup v2 group, or None where /sys/fs/cgroup is not cgroup v2."""
    try:
        lines = Path(proc).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    paths = [line[3:] for line in lines if line.startswith("0::")]
    if not paths or not (root / "cgroup.controllers").is_file():
        return None
    return root / paths[0].lstrip("/")


def _usable(where: Path) -> bool:
    try:
        enabled = set((where / "cgroup.subtree_control").read_text(encoding="utf-8").split())
    except OSError:
        return False
    return {"memory", "pids"} <= enabled and os.access(where, os.W_OK) and os.access(where / "cgroup.procs", os.W_OK)


@functools.cache
def delegated(root: Path = ROOT, proc: str = "/proc/self/cgroup") -> Path | None:
    """Where the grader may make one group per run (the parent of its own group), or None."""
    own = own_group(root, proc)
    if own is None or own == root or not _usable(own.parent):
        return None
    return own.parent


class RunGroup:
    """One run's cgroup: made with its limits, joined by the run's first process (:meth:`join`, in
    the child before it starts), and removed when the run is over (:meth:`close`). Its counters are
    read as :class:`~bertfamily.grading.cgroupv1.V1Group`'s are."""

    kind = "cgroup v2"
    memory_file, tasks_file = "memory.max", "pids.max"

    def __init__(self, parent: Path, memory_bytes: int, processes: int):
        self.path = parent / f"bertfamily-run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.path.mkdir()
        for name, value in (
            ("memory.max", memory_bytes),
            ("memory.swap.max", 0),
            ("pids.max", processes),
            ("memory.oom.group", 1),
        ):
            try:
                (self.path / name).write_text(f"{value}\n", encoding="utf-8")
            except OSError:
                if name in ("memory.max", "pids.max"):
                    self.close()
                    raise

    def join(self) -> None:  # pragma: no cover - runs in the child before exec
        with open(self.path / "cgroup.procs", "w", encoding="utf-8") as handle:
            handle.write("0\n")

    def _happened(self, events_file: str, key: str) -> bool:
        """Whether the group's ``events_file`` (``memory.events``, ``pids.events``) counts ``key`` at least once."""
        try:
            events = dict(line.split() for line in (self.path / events_file).read_text().splitlines())
        except (OSError, ValueError):
            return False
        return int(events.get(key, 0)) > 0

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the run for going past ``memory.max``."""
        return self._happened("memory.events", "oom_kill")

    def _number(self, name: str) -> int:
        try:
            return int((self.path / name).read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return 0

    def usage(self) -> int:
        return self._number("memory.current")

    def peak(self) -> int:
        return self._number("memory.peak")

    def recent_peak(self) -> int:
        return self.usage()

    def task_count(self) -> int:
        return self._number("pids.current")

    def tasks_refused(self) -> bool:
        return self._happened("pids.events", "max")

    def kill(self) -> None:
        try:
            (self.path / "cgroup.kill").write_text("1\n", encoding="utf-8")
        except OSError:
            pass

    def close(self) -> None:
        """Remove the group once its processes are gone (the watcher killed them); never raises."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                try:
                    (self.path / "cgroup.kill").write_text("1\n", encoding="utf-8")
                except OSError:
                    pass
                time.sleep(0.1)


def run_group(limits):
    """The kernel's limits of one run: a group in a delegated cgroup v2 tree, else groups in the
    cgroup v1 memory and pids hierarchies (:mod:`~bertfamily.grading.cgroupv1`), else None (the
    watcher's sampling is then the only limit). Its memory: the run's memory and its files (which
    live in memory) together; its tasks: processes and threads."""
    from bertfamily.grading import cgroupv1

    memory = (limits.memory_mib + limits.disk_mib) * 2**20
    parent = delegated()
    if parent is not None:
        try:
            return RunGroup(parent, memory, limits.processes)
        except OSError:
            pass
    return cgroupv1.v1_run_group(memory, limits.processes)
