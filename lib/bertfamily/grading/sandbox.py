"""One run of a submission: nbval in a sandboxed process tree, watched for time, memory and kernel death.

The notebook runs as ``work/submission.ipynb`` in a new temporary folder (the kernel's working
directory), with HOME and every cache inside the folder, offline, the numerical kernels pinned, and
nothing else of the instructor's environment. nbval re-executes it; a recorder writes one JSON line
per cell. Outputs that depend on where the student ran (:func:`place_independent`) are not compared.
Before each graded check cell the grader's own exporter (:mod:`bertfamily.grading.verify`) saves the
values that the check reads, outside the kernel's reach, for the grader to check again.
"""
from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from bertfamily import kernels
from bertfamily.grading.marks import _output_text

OUTPUT_TIMEOUT_S = 60  # nbval's wait for a finished cell's output messages (as the root conftest.py)
POLL_S = 0.1
_KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ")


@dataclass(frozen=True)
class Limits:
    """Per-cell and per-notebook time limits (seconds) and the memory limit of one run (MiB)."""
    cell_timeout: float = 120
    timeout: float = 900
    memory_mib: int = 4096
    threads: int | None = None  # torch threads per kernel; None: the pinned default (kernels.PINNED)


def sandbox_env(folder, threads: int | None = None) -> dict:
    """The environment of a run: PATH and locale only, offline, HOME and caches inside ``folder``.

    Nothing else of the instructor's environment passes (no tokens, keys, credentials, proxies).
    The numerical kernels are pinned as for the committed outputs (:mod:`bertfamily.kernels`), with
    ``threads`` torch threads (the grader gives each of its jobs cores / jobs).
    """
    folder = Path(folder)
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    for name, sub in (("HOME", "home"), ("TMPDIR", "tmp"), ("IPYTHONDIR", "home/.ipython"),
                      ("JUPYTER_CONFIG_DIR", "home/.jupyter"), ("JUPYTER_DATA_DIR", "home/.jupyter-data"),
                      ("JUPYTER_RUNTIME_DIR", "home/.jupyter-runtime"), ("MPLCONFIGDIR", "home/.matplotlib"),
                      ("HF_HOME", "home/.cache/huggingface")):
        env[name] = str(folder / sub)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1",
               JUPYTER_PLATFORM_DIRS="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    switch = {k: v for k, v in os.environ.items() if k == kernels.SWITCH}  # only the documented switch passes
    env.update(kernels.pinned_environ(switch, threads, shared_cores=True))
    return env


# --- the worker: a pytest run with nbval in the sandbox, recording each cell as one JSON line

_WORKER = "import sys; from bertfamily.grading.sandbox import _nbval_worker; sys.exit(_nbval_worker(sys.argv[1:]))"


def _plain(outputs) -> list:
    """Outputs reduced to what scoring needs (streams, text/plain, errors), JSON-serialisable."""
    plain = []
    for out in outputs or []:
        kind = out.get("output_type")
        if kind == "stream":
            plain.append({"output_type": kind, "name": out.get("name"), "text": out.get("text", "")})
        elif kind in ("execute_result", "display_data"):
            plain.append({"output_type": kind, "data": {"text/plain": out.get("data", {}).get("text/plain", "")}})
        elif kind == "error":
            plain.append({"output_type": kind, "ename": out.get("ename"), "evalue": out.get("evalue")})
    return plain


def _first_difference(item) -> tuple[str, str]:
    """The first line (sanitized) where a cell's stored output and its re-run output differ."""
    from itertools import zip_longest

    from nbval.plugin import coalesce_streams

    def lines(outputs):
        return item.sanitize(_output_text(nbformat.from_dict({"outputs": coalesce_streams(
            [nbformat.from_dict(copy.deepcopy(dict(o))) for o in outputs])}))).splitlines()
    for stored, rerun in zip_longest(lines(place_independent(item.cell.outputs)),
                                     lines(place_independent(item.test_outputs or [])),
                                     fillvalue="(nothing)"):
        if stored != rerun:
            return stored[:100], rerun[:100]
    return "(an output that is not text)", "(a different one)"


_WIDGET = "application/vnd.jupyter.widget-view+json"


def place_independent(outputs) -> list:
    """A cell's outputs without those that depend on where it ran, which the grader does not compare.

    Dropped: stderr (warnings, hub download lines, transformers' load reports, version banners) and
    widget displays (progress bars such as "Loading weights"). What a task computes is printed to
    stdout or displayed as data, and that is still compared.
    """
    return [o for o in outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
            and _WIDGET not in (o.get("data") or {})]


def _place_independent_compare(original):
    def compare_outputs(test, ref, skip_compare=None):
        return original(place_independent(test), place_independent(ref), skip_compare)
    return compare_outputs


def _nbval_worker(argv) -> int:
    """Run one notebook under pytest + nbval; append one JSON line per cell to the record file."""
    import pytest

    record, notebook, cell_timeout, sanitize, ini = argv

    class Recorder:
        def __init__(self, stream):
            self.stream = stream

        def write(self, **entry):
            self.stream.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self.stream.flush()

        def pytest_collection_modifyitems(self, items):
            for item in items:
                if hasattr(item, "output_timeout"):
                    item.output_timeout = OUTPUT_TIMEOUT_S
                if hasattr(item, "compare_outputs"):
                    item.compare_outputs = _place_independent_compare(item.compare_outputs)

        def pytest_runtest_logstart(self, nodeid, location):
            self.write(start=int(nodeid.rsplit("Cell ", 1)[-1]))

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            yield
            if call.when == "teardown" or (call.when == "setup" and call.excinfo is None):
                return  # a cell's result is its call; a setup is recorded only when it failed
            exc = call.excinfo.value if call.excinfo else None
            skipped = call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception)
            entry = {"cell": item.cell_num, "phase": call.when,
                     "outcome": "skipped" if skipped else "failed" if exc is not None else "passed",
                     "message": (str(exc).strip().splitlines() or [type(exc).__name__])[0] if exc else "",
                     "outputs": _plain(getattr(item, "test_outputs", None))}
            if entry["message"] == "Cell outputs differ":
                entry["stored"], entry["rerun"] = _first_difference(item)
            if entry["message"].startswith("Timeout"):
                item.session.shouldstop = "a cell timed out"  # the kernel was interrupted: stop here
            self.write(**entry)

    with open(record, "w", encoding="utf-8") as stream:
        return pytest.main([notebook, "-c", ini, "--rootdir", str(Path(ini).parent), "-p", "nbval.plugin",
                            "-p", "no:cacheprovider", "--noconftest", "-q", "--color=no", "--nbval",
                            "--nbval-current-env", "--nbval-sanitize-with", sanitize,
                            f"--nbval-cell-timeout={cell_timeout}"], plugins=[Recorder(stream)])


# --- the watcher: time, memory and kernel death, over the run's whole process tree

def _tree(pid) -> list:
    import psutil
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return []


def _alive(proc) -> bool:
    import psutil
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(pid) -> None:
    """SIGKILL a run's process tree and the process groups in it (the kernel has its own session)."""
    import psutil
    procs = _tree(pid)
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


def _records(path) -> tuple[list[int], dict]:
    """The cells a run started, and its per-cell results (by nbval's code-cell number)."""
    started, results = [], {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return started, results
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if "start" in entry:
            started.append(entry["start"])
        elif "cell" in entry:
            results[entry["cell"]] = entry
    return started, results


def _pending(record) -> int | None:
    started, results = _records(record)
    return started[-1] if started and started[-1] not in results else None


def _watch(proc, record, limits: Limits, peak: list) -> tuple[str, str, int | None]:
    """Wait for the worker; kill its tree past the time or memory limit, or when the kernel dies mid-cell.

    Returns (status, reason, cell) where status is "" when the run ended by itself; ``peak[0]`` is
    the largest resident memory of the tree seen (bytes).
    """
    import psutil
    start, limit, kernel, died = time.monotonic(), limits.memory_mib * 2**20, None, None
    while proc.poll() is None:
        tree = _tree(proc.pid)
        rss = 0
        for p in tree:
            try:
                rss += p.memory_info().rss
            except psutil.Error:
                pass
        peak[0] = max(peak[0], rss)
        if rss > limit:
            _kill(proc.pid)
            return "error", f"out of memory: the run used more than {limits.memory_mib} MiB", _pending(record)
        if time.monotonic() - start > limits.timeout:
            _kill(proc.pid)
            return "timeout", f"the notebook ran past its {limits.timeout:g} s limit", _pending(record)
        if kernel is None:
            for p in tree[1:]:
                try:
                    if any("ipykernel" in part for part in p.cmdline()):
                        kernel = p
                except psutil.Error:
                    pass
        elif not _alive(kernel) and _pending(record) is not None:
            # nbval waits for a dead kernel's reply until the cell timeout; give it a moment to
            # report (a timed-out cell whose kernel nbval stopped itself), then call it a death.
            died = died or time.monotonic()
            if time.monotonic() - died > 5:
                cell = _pending(record)
                _kill(proc.pid)
                return "error", "the kernel died", cell
        time.sleep(POLL_S)
    return "", "", None


def _no_core_dumps():  # pragma: no cover - runs in the child before exec
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_sandboxed(nb, limits: Limits, sanitize: str, exports: dict | None = None) -> dict:
    """Run ``nb`` under nbval in a new temporary folder; return what happened, cell by cell.

    The notebook is written as ``work/submission.ipynb`` (the kernel's working directory), the
    grader's own files sit next to ``work/``, HOME and every cache are inside the folder, and the
    whole folder is deleted afterwards. ``exports`` maps a check cell's id to the names its check
    reads: the grader's exporter saves them just before that cell's check runs. Returns
    ``{"status": "" | "timeout" | "error", "reason", "cell" (the code-cell number running when the
    run was stopped), "results" (per code-cell number), "answers" (per check cell id), "exit_code",
    "log", "peak_mib"}``.
    """
    from bertfamily.grading import verify

    with tempfile.TemporaryDirectory(prefix="bertfamily-grade-", ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        for sub in ("work", "home", "tmp", "grader", "answers"):
            (folder / sub).mkdir()
        notebook, record = folder / "work" / "submission.ipynb", folder / "record.jsonl"
        exporter = folder / "grader" / "export.py"
        exporter.write_text(verify.EXPORTER, encoding="utf-8")
        nb = verify.with_exports(nb, exports or {}, exporter, folder / "answers")
        nbformat.write(nb, notebook)
        (folder / "sanitize.cfg").write_text(sanitize, encoding="utf-8")
        (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        cmd = [sys.executable, "-c", _WORKER, str(record), str(notebook), str(limits.cell_timeout),
               str(folder / "sanitize.cfg"), str(folder / "pytest.ini")]
        with open(folder / "log.txt", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=folder / "work", env=sandbox_env(folder, limits.threads),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=_no_core_dumps)
            peak = [0]
            try:
                status, reason, cell = _watch(proc, record, limits, peak)
            finally:
                if proc.poll() is None:
                    _kill(proc.pid)
                proc.wait()
        _, results = _records(record)
        log = (folder / "log.txt").read_text(encoding="utf-8", errors="replace")
        answers = verify.read_answers(folder / "answers", exports or {})
    return {"status": status, "reason": reason, "cell": cell, "results": results, "answers": answers,
            "exit_code": proc.returncode, "log": log, "peak_mib": peak[0] / 2**20}
