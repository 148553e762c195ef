"""A class: the files to grade, and one :func:`grade_class` whose executor decides where each
submission runs: :class:`LocalPool` (this machine: in this process, or a pool of processes) or
:class:`~bertfamily.grading.cluster.DaskCluster`. Both run :func:`~bertfamily.grading.pipeline.grade_submission`
for each file, with the same :class:`ClassSettings`; the rows come back sorted by submission, so the
gradebook depends neither on the order given nor on where the rows were made.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bertfamily.grading.copies import copy_flags
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.monitor import Limits, die_with
from bertfamily.grading.pipeline import Row, error_row, grade_submission, sanitizers
from bertfamily.grading.sandbox import probe_kernel
from bertfamily.grading.textsafe import display_name

#: What one grading job needs: the kernel of the exercise with BERT-base and DistilBERT, and nbval.
JOB_MIB = 1843


def collect(paths) -> list[tuple[Path, str]]:
    """The files to grade, as (path, name in the gradebook): each file given, and every ``*.ipynb``
    under each folder given (``.ipynb_checkpoints`` left out), once each, sorted by name."""
    found: dict[str, tuple[Path, str]] = {}  # absolute path -> (the path given, its name in the gradebook)
    for given in paths:
        path = Path(given)
        if path.is_dir() and not path.is_symlink():
            members = [p for p in _notebooks(path) if ".ipynb_checkpoints" not in p.parts]
            if not members:
                raise ValueError(f"nothing to grade in {given}: the folder holds no .ipynb file")
        elif path.is_symlink() or path.exists():  # a FIFO, a device: its own row says it is not graded
            members = [path]
        else:
            raise ValueError(f"no such file or folder: {given}")
        for member in members:  # by the path given, not the file it leads to: two links are two rows
            found.setdefault(os.path.abspath(member), (member, display_name(member)))  # other encodings: \\xff
    if not found:
        raise ValueError("nothing to grade: give notebooks or folders of notebooks")
    return sorted(found.values(), key=lambda item: item[1])


def _notebooks(folder: Path) -> list[Path]:
    """Every ``*.ipynb`` under ``folder``, links included (graded as refused), linked folders not entered."""
    found = []
    for top, dirs, files in os.walk(folder):
        found += [Path(top) / f for f in files if f.endswith(".ipynb")]
        found += [Path(top) / d for d in dirs if d.endswith(".ipynb") and os.path.islink(os.path.join(top, d))]
    return found


@dataclass(frozen=True)
class ClassSettings:
    """What every submission of a class is graded with (pickled to each worker as it is)."""

    exercise: Exercise
    limits: Limits
    sanitize: str  # the sanitize file's text (pipeline.sanitizers)
    strict_outputs: bool = False

    def args(self, path, display: str, limits: Limits | None = None) -> tuple:
        """The arguments of :func:`~bertfamily.grading.pipeline.grade_submission` for one file."""
        return (path, display, self.exercise, limits or self.limits, self.sanitize, self.strict_outputs)


class Executor(Protocol):
    def grade(self, found: list, settings: ClassSettings, progress: bool) -> list[Row]:
        """One row per (path, display) in ``found``, in any order."""


def _grade_one(args, environ: dict | None = None) -> Row:
    if environ is not None:  # a pool's worker: the environment of the process that asked, as it is now
        os.environ.clear()
        os.environ.update(environ)
    return grade_submission(*args)


#: What a pool's workers are forked from (:func:`_context`): the checks a row is scored with, which import
#: torch and transformers (2.5-3.5 s of CPU a process), and the server's tie to the grader (its docstring).
PRELOAD = ["bertfamily.grading.preload"]
GRADER_PID = "BERTFAMILY_GRADER_PID"  # the pid of the grader that starts the fork server, as the server reads it


def _context(fork_server: bool):
    """How a pool's workers start. With ``fork_server`` (the command line's pools), forked from a server
    that imported :data:`PRELOAD` once (``forkserver``, where the platform has it), so that a pool of two
    imports torch once, not twice: the server only imports, never computes (no thread pool of torch's that
    fork would break); it dies with the grader (:mod:`~bertfamily.grading.preload`) and each worker with it;
    each task carries the asking process's environment (:func:`_grade_one`), which the server, started by an
    earlier pool of the same process, may not have. Otherwise spawned, each importing its own: a process
    may already run a fork server that is not the grader's (a notebook that trained with
    :mod:`bertfamily.parallel`), which :data:`PRELOAD` would then never reach."""
    import multiprocessing

    if not fork_server or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    os.environ[GRADER_PID] = str(os.getpid())  # the server checks it is still this grader's (preload)
    context.set_forkserver_preload(PRELOAD)
    _server_folder()
    return context


def _server_folder() -> None:
    """The folder of the fork server's socket, named as the runs' folders in /tmp are (``bfg-`` + this
    grader's pid): Python's own, ``/tmp/pymp-*``, outlives a grader killed with SIGKILL; this one is removed at
    exit, or else by the next grader's :func:`~bertfamily.grading.sandbox.sweep_leftovers`. Once a process."""
    import multiprocessing.process
    import multiprocessing.util
    import shutil
    import tempfile

    config = getattr(multiprocessing.process.current_process(), "_config", None)
    if not isinstance(config, dict) or config.get("tempdir") is not None or not os.path.isdir("/tmp"):
        return  # Python keeps its own (a socket's path must stay short: /tmp, not the runs' base)
    folder = tempfile.mkdtemp(prefix=f"bfg-{os.getpid()}-pymp-", dir="/tmp")
    config["tempdir"] = folder
    multiprocessing.util.Finalize(None, shutil.rmtree, args=(folder, True), exitpriority=-100)


def _pool(work, jobs, rows, bar, fork_server: bool = False) -> list:
    """Grade ``work`` in a pool of ``jobs`` processes, appending the rows; return the work whose worker
    died (a broken pool loses every submission that had not finished)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    environ = dict(os.environ)
    with ProcessPoolExecutor(
        max_workers=jobs, mp_context=_context(fork_server), initializer=die_with, initargs=(os.getpid(),)
    ) as pool:
        futures, taken = {pool.submit(_grade_one, args, environ): args for args in work}, set()
        try:
            for future in as_completed(futures):
                rows.append(future.result())
                taken.add(future)
                bar.update()
            return []
        except BrokenProcessPool:
            done = {f for f in futures if f.done() and not f.cancelled() and f.exception() is None}
            for future in done - taken:
                rows.append(future.result())
                bar.update()
            return [args for f, args in futures.items() if f not in done]


def _worker_died(args) -> Row:
    _, name, exercise, *_ = args
    return error_row(
        name,
        exercise,
        "error: the grading worker died while this submission ran, twice (the other submissions were graded)",
    )


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_jobs() -> int:
    """One job per core, but no more than the free memory holds (about 1.8 GiB each)."""
    import psutil

    return max(1, min(usable_cores(), int(psutil.virtual_memory().available / 2**20 // JOB_MIB)))


class _Rows(list):
    """The rows of a run, each handed to ``on_row`` (the journal) as it is appended."""

    def __init__(self, on_row=None):
        super().__init__()
        self.on_row = on_row

    def append(self, row) -> None:
        super().append(row)
        if self.on_row is not None:
            self.on_row(row)


class LocalPool:
    """This machine: in this process when ``jobs`` is 1, else a pool of ``jobs`` processes, spawned, or
    forked from a server that imported the checks once with ``fork_server`` (:func:`_context`: the command
    line's choice). A kernel is started once first (:func:`~bertfamily.grading.sandbox.probe_kernel`); each
    kernel gets cores / jobs threads; a submission whose worker died is graded again, alone, then gets an
    error row."""

    def __init__(self, jobs: int = 1, fork_server: bool = False):
        import importlib.util

        if jobs < 1:
            raise ValueError(f"--jobs must be at least 1, got {jobs}")
        missing = [m for m in ("pytest", "nbval", "psutil") if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(
                f"the grader needs {', '.join(missing)}: install the test extras "
                "(pip install -e '.[test]', as make setup does)"
            )
        self.jobs, self.fork_server = jobs, fork_server
        self.on_row = None  # called with each row as it finishes (bertfamily.grading.regrade: the journal)

    def grade(self, found: list, settings: ClassSettings, progress: bool) -> list[Row]:
        from tqdm.auto import tqdm

        limits = settings.limits
        probe_kernel(limits)  # a kernel that cannot start here is said once, before anyone is graded
        if limits.threads is None:  # share the cores between the kernels that run at once
            limits = dataclasses.replace(limits, threads=max(1, usable_cores() // max(1, min(self.jobs, len(found)))))
        work = [settings.args(path, name, limits) for path, name in found]
        rows = _Rows(self.on_row)
        with tqdm(total=len(work), desc="grading", unit="notebook", disable=not progress, file=sys.stderr) as bar:
            if self.jobs == 1:
                for args in work:
                    rows.append(_grade_one(args))
                    bar.update()
            else:
                lost = _pool(work, min(self.jobs, len(work)), rows, bar, self.fork_server)
                for args in lost:  # a worker died under them: each alone, in a worker of its own
                    if _pool([args], 1, rows, bar, self.fork_server):
                        rows.append(_worker_died(args))
                        bar.update()
        return list(rows)


def grade_class(
    paths,
    exercise: Exercise,
    limits: Limits = Limits(),
    jobs: int = 1,
    sanitize: str | Path | None = None,
    progress: bool = True,
    strict_outputs: bool = False,
    *,
    executor: Executor | None = None,
) -> list[Row]:
    """Grade every submission under ``paths`` (see :func:`collect`) against ``exercise`` with
    ``executor`` (default: a :class:`LocalPool` of ``jobs``); rows sorted by submission, so the
    gradebook does not depend on the order given, on ``jobs`` or on the executor. ``sanitize``: the
    nbval sanitize file the outputs are compared through (:func:`~bertfamily.grading.pipeline.sanitizers`;
    None: as printed). Copies (:mod:`~bertfamily.grading.copies`) are flagged across the class, after
    every row is made."""
    executor = executor or LocalPool(jobs)  # a bad --jobs is refused before anything is read
    settings = ClassSettings(exercise, limits, sanitizers(sanitize or None), strict_outputs)
    found = collect(paths)
    rows = executor.grade(found, settings, progress)
    copies = copy_flags(found, exercise)  # for the instructor to read: never a mark
    for row in rows:
        if copies.get(row.submission):
            row.flags = "; ".join([row.flags, *copies[row.submission]] if row.flags else copies[row.submission])
    return sorted(rows, key=lambda r: r.submission)


def grade_notebook(
    path,
    exercise: Exercise,
    limits: Limits = Limits(),
    sanitize: str | Path | None = None,
    strict_outputs: bool = False,
) -> Row:
    """Grade one notebook exactly as a class is graded (:func:`grade_class`: the same sandbox, checks
    and row), with the class's defaults: ``python -m bertfamily.grading grade NOTEBOOK``."""
    path = Path(path)
    if not path.is_file() and not path.is_symlink():
        raise ValueError(f"no notebook at {path}")
    (row,) = grade_class(
        [path],
        exercise,
        limits,
        sanitize=sanitize,
        progress=False,
        strict_outputs=strict_outputs,
        executor=LocalPool(1),
    )
    return row
