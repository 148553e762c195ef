"""The peak memory of a process tree, sampled from outside (:class:`TreePeak`)."""

from __future__ import annotations

import os
import threading

MIB = 2**20


def _status_mib(path: str, key: str) -> float | None:
    """The ``key:`` line (in kB) of a ``/proc`` file, in MiB; None where there is no such file or line."""
    try:
        with open(path, encoding="ascii") as lines:
            for line in lines:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError):
        pass
    return None


def _hwm_mib(pid: int) -> float:
    """The kernel's own record of a process's peak resident memory (``VmHWM``, Linux), 0 elsewhere."""
    return _status_mib(f"/proc/{pid}/status", "VmHWM:") or 0.0


def _pss_mib(pid: int) -> float | None:
    """A process's proportional set size (``Pss`` of ``/proc/PID/smaps_rollup``, Linux): its own
    pages plus its share of the pages it shares, so that the PSS of processes add up to the memory
    they hold together, each shared page once, as a cgroup (Binder's limit) counts it. None where
    the kernel does not say."""
    return _status_mib(f"/proc/{pid}/smaps_rollup", "Pss:")


#: A tree of several processes reads their PSS on every this many samples (the RSS on every one).
PSS_EVERY = 10


class TreePeak:
    """Peak resident memory of a process tree, sampled from outside by a background thread.

    Every ``interval`` seconds the thread sums the memory of every process below ``root`` (its
    children, their children, ...; and ``root`` itself with ``include_root``) and keeps the
    largest sum: ``sampled_mib``. A tree of one process counts its RSS; a tree of several (a
    kernel and its worker processes, which map the same libraries) counts each one's proportional
    set size, so that a page they share counts once, as the cgroup of a Binder session counts it
    (read every :data:`PSS_EVERY` samples; in between, cheap RSS readings less each process's shared
    excess at the last reading: reading PSS often would slow the processes it measures).
    It also keeps, per process, the peak that the operating system recorded for that process alone
    (``VmHWM`` on Linux), which catches a spike between two samples: ``largest_process_mib`` is the
    largest of those.

    ``peak_mib`` is the larger of the two. Both are lower bounds of the true peak of the tree
    (sampling can miss a short spike of a child; one process's peak is part of the tree's). Use it
    as a context manager::

        with TreePeak() as peak:      # root: this process; only its descendants are counted
            subprocess.run(...)
        peak.peak_mib

    ``root`` is a process id, None (this process), or a function that returns the id once there is
    one and None before (a notebook's kernel, which starts inside the block).
    """

    def __init__(self, root: int | None = None, interval: float = 0.05, include_root: bool = False):
        import psutil

        if not isinstance(interval, (int, float)) or interval <= 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        if root is None:
            root = os.getpid()
        # a callable root is asked on every sample until it names a process (a kernel not yet started)
        self._find_root = root if callable(root) else None
        self.root = None if callable(root) else psutil.Process(root)
        self.interval = float(interval)
        self.include_root = include_root
        self.sampled_mib = 0.0
        self.hwm = {}  # pid -> MiB
        self._excess = {}  # pid -> its RSS - PSS (MiB) at the last reading of its PSS
        self.samples = 0
        self._before = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="TreePeak", daemon=True)

    def tree(self) -> list:
        """The processes counted now."""
        import psutil

        if self.root is None:
            pid = self._find_root()
            if pid is None:
                return []
            try:
                self.root = psutil.Process(pid)
            except psutil.Error:
                return []
        try:
            procs = [p for p in self.root.children(recursive=True) if p.pid not in self._before]
        except psutil.Error:
            procs = []
        return ([self.root] if self.include_root else []) + procs

    def sample(self) -> float:
        """Measure the tree once; return its memory now in MiB (and update the peaks)."""
        import psutil

        total = 0.0
        procs = self.tree()
        # PSS walks a process's page tables (and takes its memory map's lock): read it every
        # PSS_EVERY-th sample only, and in between take from each RSS the shared excess (RSS - PSS)
        # of the last reading (what a process grows by is its own)
        fresh = self.samples % PSS_EVERY == 0
        for proc in procs:
            try:
                rss = proc.memory_info().rss / MIB
                if len(procs) > 1:
                    pss = _pss_mib(proc.pid) if fresh or proc.pid not in self._excess else None
                    if pss is not None:
                        self._excess[proc.pid] = max(0.0, rss - pss)
                    rss = max(0.0, rss - self._excess.get(proc.pid, 0.0))
                total += rss
            except psutil.Error:  # it ended between listing and reading
                continue
            self.hwm[proc.pid] = max(self.hwm.get(proc.pid, 0.0), _hwm_mib(proc.pid))
        self.sampled_mib = max(self.sampled_mib, total)
        self.samples += 1
        return total

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    @property
    def largest_process_mib(self) -> float:
        return max(self.hwm.values(), default=0.0)

    @property
    def peak_mib(self) -> float:
        return max(self.sampled_mib, self.largest_process_mib)

    def __enter__(self) -> TreePeak:
        # processes the caller already had (a test runner's other children, a worker pool) are not
        # part of what is measured: only those started inside the block are
        self._before = set()
        self._before = {p.pid for p in self.tree()}
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False
