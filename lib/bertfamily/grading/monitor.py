"""A run's limits, and the watcher that stops a run past one and says which limit held it.

What the Linux kernel holds (set up by :mod:`bertfamily.grading.mounts`, :mod:`~bertfamily.grading.cgroups`
and :func:`child_limits`): the run's files in one size-capped tmpfs, ``/dev/shm`` a tmpfs as large as
its memory; where the grader can make cgroups (v2 delegated, or v1 as root), memory of every kind
(pages, tmpfs files, socket buffers, kernel memory) and tasks (processes and threads); one file at
most ``--disk-mib``; no core dumps. With a group the watcher reads its counters ten times a second (a
pass costs the same whatever the run holds) to stop a run at ``--memory-mib`` and say why; without
one it samples the run's process tree (memory, ``memfd``s, ``/dev/shm``, processes and threads: the
named fallback, whose cost grows with the descriptors the run holds). Time and CPU are the watcher's;
the bytes the run can add to the grader's own disk (the socket folder, when it is not a capped tmpfs,
files there open or mapped after deletion, the run's record) are sampled once a second.
"""
from __future__ import annotations

import os
import signal
import stat
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bertfamily import kernels
from bertfamily.grading import trees
from bertfamily.grading.nbval_worker import inside, pending, process_tree

POLL_S = 0.1
DISK_POLL_S = 1.0
#: CPU seconds a run may use beyond ``Limits.cpu_factor`` times its share of cores (its torch threads)
#: before it is stopped for taking a classmate's CPU (spinning processes left behind, say).
CPU_GRACE_S = 10.0
MAX_FILE_BYTES = 4 * 2**30  # RLIMIT_FSIZE: one file written by the kernel (at most the disk limit)
#: The last bytes of the run's own output (the nbval worker's and the kernel's) that the grader keeps.
LOG_TAIL_BYTES = 64 * 2**10


@dataclass(frozen=True)
class Limits:
    """Time (seconds), memory and disk (MiB) and process limits of one run; ``sandbox=False`` only
    with the instructor's explicit ``--unsafe-no-sandbox``."""
    cell_timeout: float = 120
    timeout: float = 900
    memory_mib: int = 4096
    threads: int | None = None  # torch threads per kernel; None: the pinned default (kernels.PINNED)
    disk_mib: int = 4096
    processes: int = 256
    sandbox: bool = True
    cpu_factor: float = 1.5  # CPU a run may use: this times its share of cores (its threads), after a grace


def _alive(proc) -> bool:
    import psutil
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_tree(pid) -> None:
    """SIGKILL a run's process tree and the process groups in it (the kernel has its own session).
    Killing the sandbox's first process ends every process of its PID namespace, daemons included."""
    import psutil
    for _ in range(50):
        procs = [p for p in process_tree(pid) if _alive(p)]
        if not procs:
            return
        for proc in procs:
            try:
                group = os.getpgid(proc.pid)
                if group != os.getpgrp():
                    os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
            try:
                proc.kill()
            except psutil.Error:
                pass
        time.sleep(0.02)


def _holdings(proc, seen: set, devices: set) -> tuple[int, int]:
    """A process's share of memory (PSS: pages shared with its forks count once in all; its resident
    memory where the system does not say), plus the anonymous files it holds open (``memfd``), which
    live in memory without being mapped; and the bytes of files it holds open after deleting them on
    one of ``devices`` (the grader's disks). Each file counts once, by inode, in ``seen``."""
    import psutil
    try:
        memory = proc.memory_full_info().pss
    except (psutil.Error, AttributeError):
        try:
            memory = proc.memory_info().rss
        except psutil.Error:
            return 0, 0
    disk, fds = 0, f"/proc/{proc.pid}/fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return memory, 0
    for fd in names:
        try:
            target = os.readlink(f"{fds}/{fd}")
            if not target.startswith("/"):
                continue  # sockets, pipes, anonymous inodes
            info = os.stat(f"{fds}/{fd}")
            key = (info.st_dev, info.st_ino)
            if key in seen:
                continue
            if target.startswith("/memfd:"):
                seen.add(key)
                memory += info.st_blocks * 512
            elif stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and info.st_dev in devices:
                seen.add(key)
                disk += info.st_blocks * 512
        except OSError:
            pass
    return memory, disk


def _mapped_deleted(pid: int, seen: set, devices: set) -> int:
    """Bytes of the files a process keeps mapped after closing and deleting them, on one of
    ``devices``: no name and no descriptor holds them, only the mapping (``mmap``, then ``unlink``)."""
    total = 0
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            lines = [line for line in maps if line.rstrip().endswith("(deleted)")]
    except OSError:
        return 0
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/") or parts[5].startswith(("/memfd:", "/dev/zero")):
            continue
        try:
            major, minor = (int(x, 16) for x in parts[3].split(":"))
            key = (os.makedev(major, minor), int(parts[4]))
        except ValueError:
            continue
        if key in seen or key[0] not in devices:
            continue
        seen.add(key)
        start, end = (int(x, 16) for x in parts[0].split("-"))
        try:  # the whole file stays on disk while any part of it is mapped
            total += os.stat(f"/proc/{pid}/map_files/{parts[0]}").st_blocks * 512
        except OSError:
            total += end - start
    return total


def _cpu(tree) -> float:
    """CPU seconds the processes of a tree have used (their finished children's included)."""
    import psutil
    total = 0.0
    for p in tree:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def tmpfs_used(kernel) -> tuple[int, bool, int, bool]:
    """The sandbox's capped file systems, seen through its kernel: (bytes of its files (its root),
    whether that is full, bytes in its ``/dev/shm`` (memory), whether that is full)."""
    found: list[tuple[int, bool]] = []
    for where in ("", "/dev/shm"):
        try:
            fs = os.statvfs(f"/proc/{kernel.pid}/root{where}") if kernel is not None else None
        except OSError:
            fs = None
        if fs is None:
            found.append((0, False))
        else:
            found.append(((fs.f_blocks - fs.f_bfree) * fs.f_frsize, fs.f_bavail * fs.f_frsize < 2**16))
    (files, files_full), (shm, shm_full) = found
    return files, files_full, shm, shm_full


def _tasks(tree) -> int:
    """Processes and threads of a tree (each takes a PID of the host's)."""
    import psutil
    total = 0
    for p in tree:
        try:
            total += p.num_threads()
        except psutil.Error:
            pass
    return total


def _sampled_memory(tree, devices) -> tuple[int, int, set]:
    """The watcher's fallback without a cgroup: (memory of the tree, bytes of deleted files it holds
    open on the grader's disks, the files seen). Its cost grows with the descriptors the run holds."""
    seen: set = set()  # the open files counted so far (_holdings)
    used, deleted = 0, 0
    for p in tree:
        memory, disk = _holdings(p, seen, devices)
        used, deleted = used + memory, deleted + disk
    return used, deleted, seen


def held(group, what: str) -> str:
    """What holds a limit, for a row's reason: the cgroup file, or the watcher's sampling."""
    if group is None:
        return "sampled by the grader's watcher (no cgroup here)"
    return f"held by {group.kind} {group.memory_file if what == 'memory' else group.tasks_file}"


def out_of_memory(limits: Limits, group) -> str:
    """A run's reason past its memory limit: one wording whether the watcher or the kernel stopped it
    first (which one is a race, so two gradings of one notebook would otherwise differ)."""
    if group is None:
        how = held(group, "memory")
    else:
        how = (f"with its {limits.disk_mib} MiB of files: held by {group.kind} {group.memory_file} at "
               f"{limits.memory_mib + limits.disk_mib} MiB")
    return (f"out of memory: the run used more than {limits.memory_mib} MiB of memory (memory, /dev/shm and "
            f"socket buffers; {how})")


def watch(proc, record, limits: Limits, peak: list, writable=(), cpu=None, group=None,
          capped_runtime: bool = False) -> tuple[str, str, int | None]:
    """Wait for the worker; kill its tree past the time, memory, process or disk limit, or when the
    kernel dies mid-cell. ``writable``: the grader's folders the kernel can write into (sampled; the
    sandbox's own are capped by the kernel). ``group``: the run's cgroup, whose counters replace the
    sampling of memory and tasks (a few small files read: the pass costs the same whatever the run
    holds); ``capped_runtime``: the socket folder is a size-capped tmpfs (no deleted file there to
    look for). Returns (status, reason, cell) where status is "" when the run ended by itself;
    ``peak[0]`` is the largest memory of the tree seen (bytes)."""
    cpu = cpu if cpu is not None else [0.0]
    share = limits.threads or int(kernels.pinned_environ({}, None, shared_cores=True).get("OMP_NUM_THREADS", 2))
    start, limit, kernel, died, disk_at = time.monotonic(), limits.memory_mib * 2**20, None, None, 0.0
    devices = set()
    for folder in writable:
        try:
            devices.add(os.stat(folder).st_dev)
        except OSError:
            pass
    files, shm = 0, 0
    seen: set = set()  # the open files counted so far (_holdings)
    scan = group is None or not capped_runtime  # deleted files on the grader's disk: only where they can be

    def stop(status, reason, cell=None):
        if group is not None:
            group.kill()
        kill_tree(proc.pid)
        return status, reason, pending(record) if cell is None else cell

    while proc.poll() is None:
        tree = process_tree(proc.pid)
        if group is not None:
            if group.tasks_refused():
                return stop("error", f"too many processes: the run tried to start more than {limits.processes} "
                                     f"processes and threads (tasks: {held(group, 'tasks')})")
            used, deleted = group.recent_peak(), 0  # a spike between two passes included
            if scan:
                deleted, seen = _sampled_memory(tree, devices)[1:]
            used -= files  # the run's files are in memory too: the memory limit is the rest
        else:
            if _tasks(tree) > limits.processes:
                return stop("error", f"too many processes: the run started more than {limits.processes} processes "
                                     f"and threads (tasks: {held(group, 'tasks')})")
            used, deleted, seen = _sampled_memory(tree, devices)
            used += shm
        peak[0] = max(peak[0], used)
        if used > limit:
            return stop("error", out_of_memory(limits, group))
        elapsed = time.monotonic() - start
        cpu[0] = max(cpu[0], _cpu(tree))
        if cpu[0] > CPU_GRACE_S + limits.cpu_factor * share * elapsed:
            return stop("error", f"more than its share of the CPU: the run kept more than {share} cores busy "
                                 "(processes left running?)")
        if time.monotonic() - start > limits.timeout:
            return stop("timeout", f"the notebook ran past its {limits.timeout:g} s limit (time: held by the "
                                   "grader's watcher, wall clock)")
        if kernel is None:
            kernel = inside(tree) if limits.sandbox else next((p for p in tree[1:] if _is_kernel(p)), None)
        if time.monotonic() - disk_at > DISK_POLL_S:
            disk_at = time.monotonic()
            try:
                sampled = sum(trees.measure(w) for w in writable)
            except trees.TooLarge as exc:
                return stop("error", f"a file tree too large: the run made {exc} in a folder the grader reads")
            alive = limits.sandbox and kernel is not None and _alive(kernel)
            files, full, shm, shm_full = tmpfs_used(kernel if alive else None)
            try:
                sampled += os.stat(record).st_size
            except OSError:
                pass
            if scan:
                # files mapped after deletion (no name, no descriptor): read here, once a second, not
                # at every poll (a kernel's map has thousands of lines); `seen` holds the open ones
                deleted += sum(_mapped_deleted(p.pid, seen, devices) for p in tree)
            if shm_full:
                return stop("error", f"out of memory: /dev/shm is full (its {limits.memory_mib} MiB are the run's "
                                     "memory; held by the size of the sandbox's /dev/shm tmpfs)")
            if full or sampled + deleted + files > limits.disk_mib * 2**20:
                return stop("error", f"out of disk: the run wrote more than {limits.disk_mib} MiB (its files: held "
                                     "by the size of the sandbox's tmpfs)")
        if kernel is not None and not _alive(kernel) and pending(record) is not None:
            # nbval waits for a dead kernel's reply until the cell timeout; give it a moment to
            # report (a timed-out cell whose kernel nbval stopped itself), then call it a death.
            died = died or time.monotonic()
            if time.monotonic() - died > 5:
                return stop("error", "the kernel died")
        time.sleep(POLL_S)
    return "", "", None


def _is_kernel(p) -> bool:
    import psutil
    try:
        return any("ipykernel" in part for part in p.cmdline())
    except psutil.Error:
        return False


class LogTail:
    """The run's own output (the nbval worker's, and whatever the kernel writes to its stdout and
    stderr), read from a pipe as it comes; only the last :data:`LOG_TAIL_BYTES` are kept, so a run
    that prints gigabytes costs the grader neither memory nor disk."""

    def __init__(self, stream):
        self.stream, self.data, self.total = stream, bytearray(), 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.stream.fileno(), 2**16)
            except OSError:
                return
            if not chunk:
                return
            self.total += len(chunk)
            self.data += chunk
            if len(self.data) > LOG_TAIL_BYTES:
                del self.data[:-LOG_TAIL_BYTES]

    def text(self, timeout: float = 10) -> str:
        self.thread.join(timeout)
        text = bytes(self.data).decode("utf-8", errors="replace")
        if self.total > len(self.data):
            text = f"[... {self.total - len(self.data):,} bytes of output cut]\n" + text
        return text


def die_with_parent() -> None:
    """Have Linux kill this process when the one that started it ends (``PR_SET_PDEATHSIG``): a grader
    killed mid-class leaves no worker grading on, orphaned. Elsewhere it does nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def die_with(grader: int) -> None:
    """A pool's worker: :func:`die_with_parent`, then end at once if ``grader`` (the process that asked for
    the pool) has already ended. The worker's parent is the grader, or the fork server that the grader's
    death takes with it (:mod:`~bertfamily.grading.preload`); either may have ended before the tie was
    made, and a worker left so would wait on its task queue forever."""
    die_with_parent()
    try:
        os.kill(grader, 0)
    except ProcessLookupError:
        os._exit(0)
    except PermissionError:  # alive, another user's (never the case for the grader's own pool)
        pass


def child_limits(file_bytes: int = MAX_FILE_BYTES, group=None):
    """What the nbval worker (and so its kernel) starts with: no core dumps, one file at most
    ``file_bytes``, death with the grader, and the run's cgroup (``group``, where one is delegated)."""
    def apply():  # pragma: no cover - runs in the child before exec
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        die_with_parent()  # the nbval worker (and, by bwrap's --die-with-parent, the kernel) ends with its grader
        if group is not None:
            group.join()
    return apply


def writable_folders(folder: Path, runtime: Path, sandbox: bool) -> list[Path]:
    """The grader's folders a run's kernel can write into: only its socket folder in the sandbox
    (its other writable space is capped by the kernel); without the sandbox, its home, /tmp and work."""
    if sandbox:
        return [runtime]
    return [*(folder / s for s in ("home", "tmp", "work", "shm")), runtime]
