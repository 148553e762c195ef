"""Grading a class on a Dask distributed cluster: ``bertfamily-grade ... --scheduler ADDRESS``.

Each submission is one Dask task that runs :func:`~bertfamily.grading.pipeline.grade_submission`
(the same sandbox as a local run) on a worker, from the submission's bytes (workers need not share
the instructor's files). The rows are the local run's, sorted the same way, so the gradebook and
the feedback files are byte for byte those of a local run.

Workers must match: before a worker gets a submission, the course there (Python, the package's
version and a digest of all its files, the libraries that decide outputs) is compared with the
instructor's (:func:`fingerprint`); a worker that differs is refused, saying what differs, and each
task checks again before it grades. The exercise (the reference's tasks) and the sanitize rules
travel with each task: a worker needs no copy of them.

Nothing is lost: each task is pinned to one worker process, at most one per thread, so the tasks on
a worker that dies are exactly the ones it was running. Dask counts that death against them (the
scheduler's ``suspicious`` count); they are re-run elsewhere, and a submission that was running on
two workers that died gets an ``error`` row instead of a third try. Every finished row is appended
to a journal next to the gradebook (:class:`Journal`): an interrupted run (Ctrl-C, the scheduler
gone) says what was graded, and ``--resume`` grades only the rest.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bertfamily.grading.classroom import ClassSettings, usable_cores
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.fingerprints import bytes_digest, fingerprint, worker_problems
from bertfamily.grading.journal import Interrupted, Journal, journal_path, run_settings
from bertfamily.grading.monitor import Limits
from bertfamily.grading.pipeline import Row, error_row, grade_submission
from bertfamily.grading.safeio import read_regular, regular_digest
from bertfamily.grading.sandbox import COPY_PREFIX, run_base, sweep_leftovers
from bertfamily.grading.submission import MAX_NOTEBOOK_BYTES, link_problem

#: A submission running on this many workers that died gets an ``error`` row, not another try.
KILLS = 2
#: Seconds between two looks at the scheduler (workers come and go, tasks finish).
POLL_S = 0.5
#: Seconds to fetch a finished row from its worker.
RESULT_TIMEOUT_S = 60


class WorkerMismatch(RuntimeError):
    """A task reached a worker whose course differs from the instructor's: nothing was graded there."""


class WorkerReplaced(RuntimeError):
    """A task pinned to a worker process reached its replacement at the same address."""


def _worker_check(expected: dict, limits: Limits, dask_worker) -> tuple[str, list[str]]:
    return dask_worker.id, worker_problems(expected, limits)


# --------------------------------------------------------------------------- the task, on a worker

def grade_bytes(data: bytes, display: str, exercise: Exercise, limits: Limits, sanitize: str,
                strict_outputs: bool, expected: dict, worker_id: str | None = None, host_threads: int = 1,
                grader=None) -> Row:
    """One task: check this worker's course against ``expected``, then grade ``data`` (a submission's
    bytes) from a private temporary file, named ``display`` in the row. The kernel gets this machine's
    cores over ``host_threads`` (the grading threads of all workers here), as a local run shares
    them between its jobs. ``grader`` stands in for :func:`grade_submission` (tests)."""
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        worker = None
    if worker is not None and worker_id is not None and worker.id != worker_id:
        raise WorkerReplaced(f"the task was meant for worker {worker_id}, which died")
    problems = worker_problems(expected, limits)
    if problems:
        raise WorkerMismatch("; ".join(problems))
    if limits.threads is None:
        limits = dataclasses.replace(limits, threads=max(1, usable_cores() // max(1, host_threads)))
    sweep_leftovers(run_base())  # what the workers killed mid-task here left: their runs, their copies
    # named by this process (a worker killed mid-task leaves its copy behind, for the next task to remove)
    with tempfile.TemporaryDirectory(prefix=f"{COPY_PREFIX}{os.getpid()}-") as tmp:
        path = Path(tmp).resolve() / Path(display).name  # the name it was handed in under, no link on the way
        path.write_bytes(data)
        path.chmod(0o400)
        return (grader or grade_submission)(path, display, exercise, limits, sanitize, strict_outputs)


# --------------------------------------------------------------------------- the cluster

@contextmanager
def connect(scheduler: str, jobs: int = 1):
    """A client of the scheduler at ``scheduler``; ``local``: a new cluster of ``jobs`` worker
    processes (one thread each) on this machine, on loopback, closed afterwards."""
    import logging

    from distributed import Client, LocalCluster

    if scheduler == "local":
        # the workers ignore Ctrl-C (they inherit that): it stops this process, which then closes them
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:
            cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address="127.0.0.1:0", memory_limit=0, silence_logs=logging.ERROR)
        finally:
            if interrupt is not None:
                signal.signal(signal.SIGINT, interrupt)
        try:
            with Client(cluster, set_as_default=False) as client:
                yield client
        finally:
            cluster.close()
        return
    try:
        client = Client(scheduler, timeout=30, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    try:
        yield client
    finally:
        client.close()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _probe(keys):
    """Run on the scheduler (pickled by value: the scheduler needs no course): its workers, and how
    many workers died while running each of ``keys`` (Dask's ``suspicious`` count)."""
    def probe(dask_scheduler):
        workers = {addr: (ws.server_id, ws.nthreads, ws.status.name) for addr, ws in dask_scheduler.workers.items()}
        tasks = {k: dask_scheduler.tasks[k].suspicious for k in keys if k in dask_scheduler.tasks}
        return workers, tasks
    return probe


def dashboard(client) -> str:
    """Where the cluster's dashboard is, in words."""
    def has_bokeh():
        import importlib.util
        return importlib.util.find_spec("bokeh") is not None

    if "dashboard" in client.scheduler_info().get("services", {}) and client.run_on_scheduler(has_bokeh):
        return f"Dask dashboard: {client.dashboard_link}"
    return "the scheduler has no dashboard (it needs bokeh where it runs: pip install 'bertfamily[grader]')"


def _host(address: str) -> str:
    return address.rsplit(":", 1)[0]


@dataclass
class _Item:
    path: Path
    display: str
    digest: str
    kills: int = 0
    died_on: tuple = ()


class _Run:
    """The dispatch loop: each submission to a free thread of a checked worker, one attempt at a time."""

    def __init__(self, client, todo, journal, task_args, expected, bar, patience, grader):
        self.client, self.journal, self.bar, self.grader = client, journal, bar, grader
        self.queue = deque(todo)
        self.task_args, self.expected, self.patience = task_args, expected, patience
        self.token = uuid.uuid4().hex[:8]
        self.workers = {}      # (address, id) -> threads, for checked workers
        self.refused = {}      # (address, id) -> why
        self.running = {}      # future -> (item, (address, id))
        self.ready = set()     # checked workers that take tasks now
        self.alive = set()     # every worker the scheduler has now
        self.rows = []
        self.serial = 0
        self.changed = threading.Event()

    def say(self, text: str) -> None:
        self.bar.write(text, file=sys.stderr)

    # -- workers
    def check(self, seen: dict) -> None:
        """Check the workers not seen before; forget those gone."""
        new = {(addr, sid) for addr, (sid, _, _) in seen.items()} - set(self.workers) - set(self.refused)
        if new:
            answers = self.client.run(_worker_check, self.expected, self.task_args[1],
                                      workers=sorted({a for a, _ in new}), on_error="return")
            for addr, sid in sorted(new):
                answer = answers.get(addr)
                if answer is None or isinstance(answer, (OSError, TimeoutError)):
                    continue  # gone, or not answering yet: looked at again next time
                why: str | None
                if isinstance(answer, BaseException):
                    why = f"cannot run the course's code there ({type(answer).__name__}: {answer})"
                elif answer[0] != sid:
                    continue  # replaced while being checked: its successor is checked next time
                else:
                    why = "; ".join(answer[1]) or None
                if why is None:
                    self.workers[(addr, sid)] = seen[addr][1]
                else:
                    self.refused[(addr, sid)] = why
                    self.say(f"refused worker {addr} (it grades nothing): {why}")
        alive = self.alive = {(addr, sid) for addr, (sid, _, _) in seen.items()}
        for wid in set(self.workers) - alive:
            del self.workers[wid]
        self.ready = {wid for wid in self.workers if seen[wid[0]][2] == "running"}

    def free(self) -> list:
        busy = Counter(wid for _, wid in self.running.values())
        return sorted((self.workers[w] - busy[w], w) for w in self.ready if self.workers[w] > busy[w])

    def submit(self) -> None:
        while self.queue:
            slots = self.free()
            if not slots:
                return
            wid = slots[-1][1]
            item = self.queue.popleft()
            try:
                data = read_regular(item.path, MAX_NOTEBOOK_BYTES)
            except (OSError, ValueError) as exc:
                raise Interrupted(f"cannot read {item.display} any more ({exc})") from None
            if bytes_digest(data) != item.digest:
                raise Interrupted(f"{item.display} changed while the class was being graded")
            self.serial += 1
            future = self.client.submit(
                grade_bytes, data, item.display, *self.task_args, self.expected, wid[1],
                sum(n for (addr, _), n in self.workers.items() if _host(addr) == _host(wid[0])), self.grader,
                key=f"bertfamily-grade-{self.token}-{self.serial}", workers=[wid[0]], allow_other_workers=False,
                pure=False)
            self.running[future] = (item, wid)
            future.add_done_callback(lambda _: self.changed.set())

    # -- outcomes
    def finished(self, item: _Item, row: Row) -> None:
        try:
            self.journal.add(item.digest, row)
        except OSError as exc:
            raise Interrupted(f"cannot write the journal {self.journal.path} ({exc.strerror})") from None
        self.rows.append(row)
        self.bar.update()

    def lost(self, item: _Item, wid, blamed: bool) -> None:
        """An attempt ended without a row: again elsewhere, unless it was on ``KILLS`` workers that died."""
        if blamed:
            item.kills += 1
            item.died_on += (wid[0],)
        if item.kills >= KILLS:
            self.finished(item, error_row(
                item.display, self.task_args[0],
                f"error: the grading worker died while running it, {item.kills} times ({', '.join(item.died_on)}); "
                "not tried again: grade it alone to see why"))
            self.say(f"{item.display}: {item.kills} workers died while grading it: an error row, no further try")
        else:
            if blamed:
                self.say(f"worker {wid[0]} died while grading {item.display}: grading it again elsewhere")
            self.queue.appendleft(item)

    def outcome(self, future, suspicious: dict) -> None:
        from distributed.scheduler import KilledWorker

        item, wid = self.running.pop(future)
        if future.status == "finished":
            try:  # the row is fetched from the worker, which may die first: then it is graded again
                row = future.result(timeout=RESULT_TIMEOUT_S)
            except (OSError, TimeoutError):
                self.lost(item, wid, False)
            else:
                self.finished(item, row)
            return
        exc = future.exception() if future.status == "error" else None
        if isinstance(exc, WorkerMismatch):
            self.refused[wid] = str(exc)
            self.workers.pop(wid, None)
            self.say(f"refused worker {wid[0]} (it grades nothing): {exc}")
            self.queue.appendleft(item)
        elif isinstance(exc, KilledWorker):
            self.lost(item, wid, True)
        elif exc is None or isinstance(exc, WorkerReplaced):
            self.lost(item, wid, suspicious.get(future.key, 1) > 0)
        else:
            raise Interrupted(f"grading {item.display} failed on worker {wid[0]} ({type(exc).__name__}: {exc})") \
                from exc

    def run(self) -> list[Row]:
        waiting_since = time.monotonic()
        while self.queue or self.running:
            self.changed.wait(POLL_S)  # a task ended, or it is time to look at the workers again
            self.changed.clear()
            seen, suspicious = self.client.run_on_scheduler(_probe([f.key for f in self.running]))
            for future in [f for f in self.running if f.done()]:
                self.outcome(future, suspicious)
            self.check(seen)
            for future, (item, wid) in list(self.running.items()):
                if wid not in self.workers and wid not in self.refused:  # its worker died (or left)
                    del self.running[future]
                    future.cancel()
                    self.lost(item, wid, suspicious.get(future.key, 1) > 0)
            self.submit()
            refused = sorted((addr, why) for (addr, sid), why in self.refused.items() if (addr, sid) in self.alive)
            if self.running or not self.queue or self.workers or not refused:
                waiting_since = time.monotonic()  # (a cluster still starting its workers is waited for)
            elif time.monotonic() - waiting_since > self.patience:
                raise Interrupted(f"every worker of the cluster was refused for {self.patience:g} s:"
                                  + "".join(f"\n  {addr}: {why}" for addr, why in refused))
            self.bar.set_postfix_str(f"{len(self.workers)} workers" + (f", {len(refused)} refused" if refused else "")
                                     + ("" if self.workers else ", waiting for workers"), refresh=False)
        return self.rows


def _interrupted(reason: str, journal: Journal, found: list, out) -> Interrupted:
    names = sorted(display for display, _ in journal.rows)
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    left = len(found) - len(names)
    return Interrupted(
        f"{reason}: {len(names)} of {len(found)} submissions graded" + (f" ({shown})" if names else "")
        + f", kept in {journal.path}; no gradebook written. The same command with --resume grades the other "
        f"{left} and writes {out}.")


class DaskCluster:
    """The executor of :func:`~bertfamily.grading.classroom.grade_class` on the Dask cluster at
    ``scheduler`` (``local``: one started here with ``jobs`` workers). Links and unreadable files are
    graded here; the rest go to the cluster as their bytes, one task each. Finished rows go to the
    journal beside ``out`` (the gradebook, written by the caller); ``resume`` reuses the rows there.
    Raises :class:`Interrupted` when the run stops before every row is in (Ctrl-C, the scheduler gone,
    every worker refused for ``patience`` s). ``grader`` stands in for grade_submission (tests)."""

    def __init__(self, scheduler: str, *, out, jobs: int = 1, resume: bool = False, force: bool = False,
                 patience: float = 120.0, grader=None):
        self.scheduler, self.out, self.jobs, self.resume, self.force = scheduler, out, jobs, resume, force
        self.patience, self.grader = patience, grader

    def grade(self, found: list, settings: ClassSettings, progress: bool) -> list[Row]:
        from tqdm.auto import tqdm

        exercise, limits, sanitizers, strict_outputs = (settings.exercise, settings.limits, settings.sanitize,
                                                        settings.strict_outputs)
        course = fingerprint()
        journal = Journal.open(journal_path(self.out), run_settings(exercise, limits, sanitizers, strict_outputs,
                                                                    course), self.resume, self.force)
        try:
            rows, todo = [], []
            for path, display in found:
                digest = regular_digest(path, MAX_NOTEBOOK_BYTES)  # a FIFO, a link, a sparse TiB: None
                if digest is None or link_problem(path) is not None:  # the grader's own row, made here
                    rows.append(grade_submission(*settings.args(path, display)))
                elif (display, digest) in journal.rows:
                    rows.append(journal.rows[(display, digest)])
                else:
                    todo.append(_Item(path, display, digest))
            if self.resume and len(rows) > 0:
                print(f"resuming: {len(rows)} of {len(found)} submissions already graded ({journal.path})",
                      file=sys.stderr)
            if todo:
                rows += _grade_remote(todo, found, journal, exercise, limits, sanitizers, strict_outputs, course,
                                      self.scheduler, self.out, self.jobs, progress, self.patience, self.grader, tqdm)
        finally:
            journal.close()
        return rows


def _grade_remote(todo, found, journal, exercise, limits, sanitizers, strict_outputs, course, scheduler, out,
                  jobs, progress, patience, grader, tqdm) -> list[Row]:
    from distributed.comm.core import CommClosedError

    task_args = (exercise, limits, sanitizers, strict_outputs)
    done = len(found) - len(todo)
    try:
        with connect(scheduler, min(jobs, len(todo))) as client:
            print(dashboard(client), file=sys.stderr)
            with tqdm(total=len(found), initial=done, desc="grading", unit="notebook", disable=not progress,
                      file=sys.stderr, dynamic_ncols=True) as bar:
                run = _Run(client, todo, journal, task_args, course, bar, patience, grader)
                try:
                    return run.run()
                finally:
                    for future in run.running:
                        future.cancel()
    except KeyboardInterrupt:
        raise _interrupted("interrupted (Ctrl-C)", journal, found, out) from None
    except (CommClosedError, OSError, TimeoutError) as exc:
        raise _interrupted(f"lost the scheduler at {scheduler} ({type(exc).__name__}: {exc})", journal, found,
                           out) from None
    except Interrupted as exc:
        raise _interrupted(str(exc), journal, found, out) from None
