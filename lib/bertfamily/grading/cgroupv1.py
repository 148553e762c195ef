"""Kernel-held limits for a run on a machine with cgroup v1 (the ``memory`` and ``pids`` hierarchies
mounted, the grader allowed to make groups in them: root in a VM or container, as on the course's
grading machines and its CI).

Each run gets a group of its own in each hierarchy, below the grader's own group there:

* ``memory.limit_in_bytes``: everything a run holds in memory, charged by the Linux kernel to the
  group of the process that allocated it: its pages, its tmpfs files (its disk, ``/dev/shm``, the
  socket folder), its Unix socket buffers and other kernel memory (v1 charges ``kmem`` into the same
  counter). Measured on Linux 6.18 (``tools/measure_cgroup_v1.py``): 1,000 filled Unix socketpairs
  added 232 MiB to the group's usage, all of it kernel memory; 400 MiB of anonymous memory, of
  ``/dev/shm`` or of socket buffers under a 256 MiB limit were each stopped by the kernel's OOM killer
  at 256 MiB. ``memory.memsw.limit_in_bytes`` (where swap accounting is on) gets the same value.
* ``pids.max``: processes *and threads* (each takes a PID of the host's): a run's 64th task fails to
  start under ``pids.max`` 64 (``fork`` and ``pthread_create`` get EAGAIN).

The watcher reads the groups' counters (a few small files: its cost does not grow with what the run
holds) to say which limit a stopped run passed, and kills the group's tasks at the end.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
HIERARCHIES = ("memory", "pids")


def own_path(hierarchy: str, proc: str = "/proc/self/cgroup") -> str | None:
    """This process's group in a cgroup v1 ``hierarchy`` (``/process_api/abc``), or None."""
    try:
        lines = Path(proc).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy in controllers.split(","):
            return path
    return None


def parents(root: Path = ROOT, proc: str = "/proc/self/cgroup") -> dict | None:
    """Where the grader may make a run's groups: {hierarchy: folder}, or None where either v1
    hierarchy is missing or not writable (cgroup v2 only, a container without them, not root)."""
    found = {}
    for hierarchy in HIERARCHIES:
        path = own_path(hierarchy, proc)
        folder = root / hierarchy / (path or "").lstrip("/")
        if path is None or not (folder / "cgroup.procs").is_file() or not os.access(folder, os.W_OK):
            return None
        found[hierarchy] = folder
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _number(path: Path) -> int:
    try:
        return int(_read(path).split()[0])
    except (IndexError, ValueError):
        return 0


class V1Group:
    """One run's groups (memory and pids): made with the limits, joined by the run's first process
    before it starts (:meth:`join`), their tasks killed and the groups removed at the end (:meth:`close`)."""

    kind = "cgroup v1"
    memory_file, tasks_file = "memory.limit_in_bytes", "pids.max"

    def __init__(self, folders: dict, memory_bytes: int, tasks: int):
        name = f"bertfamily-run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.memory, self.pids = folders["memory"] / name, folders["pids"] / name
        self.memory_bytes, self.tasks = memory_bytes, tasks
        made = []
        try:
            for folder in (self.memory, self.pids):
                folder.mkdir()
                made.append(folder)
            (self.memory / "memory.limit_in_bytes").write_text(f"{memory_bytes}\n", encoding="utf-8")
            try:  # memory and swap together, where swap is accounted (swap off: the file is absent)
                (self.memory / "memory.memsw.limit_in_bytes").write_text(f"{memory_bytes}\n", encoding="utf-8")
            except OSError:
                pass
            (self.pids / "pids.max").write_text(f"{tasks}\n", encoding="utf-8")
        except OSError:
            for folder in made:
                _remove(folder)
            raise

    def join(self) -> None:  # pragma: no cover - runs in the child before exec
        for folder in (self.memory, self.pids):
            with open(folder / "cgroup.procs", "w", encoding="utf-8") as handle:
                handle.write("0\n")

    def usage(self) -> int:
        """Bytes the run holds now (pages, tmpfs files, socket buffers, kernel memory)."""
        return _number(self.memory / "memory.usage_in_bytes")

    def peak(self) -> int:
        return _number(self.memory / "memory.max_usage_in_bytes")

    def recent_peak(self) -> int:
        """The most the run held since the last call (the peak counter, then reset to the usage now):
        a spike that came and went between two of the watcher's passes is seen."""
        peak = self.peak()
        try:
            (self.memory / "memory.max_usage_in_bytes").write_text("0\n", encoding="utf-8")
        except OSError:
            pass
        return max(peak, self.usage())

    def out_of_memory(self) -> bool:
        """Whether the kernel's OOM killer killed a task of the run (``oom_kill`` in ``memory.oom_control``)."""
        for line in _read(self.memory / "memory.oom_control").splitlines():
            if line.startswith("oom_kill ") and line.split()[1] != "0":
                return True
        return False

    def tasks_refused(self) -> bool:
        """Whether a process or thread of the run was refused for passing ``pids.max``."""
        for line in _read(self.pids / "pids.events").splitlines():
            if line.startswith("max ") and line.split()[1] != "0":
                return True
        return False

    def task_count(self) -> int:
        return _number(self.pids / "pids.current")

    def kill(self) -> None:
        """SIGKILL every task of the run (the pids group holds them all; pids.max bounds the list)."""
        for _ in range(50):
            pids = [int(p) for p in _read(self.pids / "cgroup.procs").split() if p.isdigit()]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def close(self) -> None:
        """Kill what is left and remove both groups; never raises."""
        self.kill()
        for folder in (self.memory, self.pids):
            _remove(folder)


def _remove(folder: Path) -> None:
    for _ in range(50):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)


def sweep(root: Path = ROOT) -> int:
    """Kill the tasks of, and remove, the groups of graders that are gone (a grader killed mid-run
    cannot close its groups: each group's name holds its grader's process id); the number removed."""
    folders, removed = parents(root), 0
    for folder in (folders or {}).values():
        try:
            entries = [e for e in os.scandir(folder) if e.name.startswith("bertfamily-run-") and e.is_dir()]
        except OSError:
            continue
        for entry in entries:
            try:
                os.kill(int(entry.name.split("-")[2]), 0)
                continue  # its grader is alive
            except ProcessLookupError:
                pass
            except (OSError, ValueError, IndexError):
                continue
            for pid in _read(Path(entry.path) / "cgroup.procs").split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            _remove(Path(entry.path))
            removed += not os.path.exists(entry.path)
    return removed


def v1_run_group(memory_bytes: int, tasks: int, root: Path = ROOT) -> V1Group | None:
    """A run's v1 groups with these limits, where the machine lets the grader make them; else None."""
    folders = parents(root)
    if folders is None:
        return None
    try:
        return V1Group(folders, memory_bytes, tasks)
    except OSError:
        return None
