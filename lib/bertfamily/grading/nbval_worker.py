"""The nbval worker: a child process of the grader that runs one notebook under pytest + nbval, its
kernel in the sandbox, and writes one JSON line per cell to the run's record.

The record is all the grader reads of a run, so it is bounded and read as a stream: each output's
text is cut (:data:`MAX_TEXT`), each cell keeps at most :data:`CELL_TEXT` characters of text and two
answers messages, and past :data:`RECORD_SOFT` bytes only what scoring needs (errors, answers) is
kept; at :data:`RECORD_MAX` the run is stopped. After each cell, the sizes of the files then in the
run's writable space are recorded (seen from outside the kernel): a size the notebook reports as
measured must be one of them.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import nbformat

from bertfamily.grading.channel import ANSWERS_MIME
from bertfamily.grading.marks import output_text

WORKER_COMMAND = "import sys; from bertfamily.grading.nbval_worker import main; sys.exit(main(sys.argv[1:]))"
OUTPUT_TIMEOUT_S = 60  # nbval's wait for a finished cell's output messages (as the root conftest.py)
MAX_TEXT = 100_000  # characters of one output the grader keeps (what scoring reads is a few lines)
CELL_TEXT = 256 * 2**10  # characters of text the grader keeps of one cell's outputs
ANSWERS_KEPT = 2  # answers messages kept per cell (two already mean a forgery)
RECORD_SOFT = 24 * 2**20  # bytes of record past which a cell keeps only its errors and answers
RECORD_MAX = 32 * 2**20  # bytes of record at which the run is stopped
MAX_SIZES = 2000  # file sizes recorded per cell
FULL = "the run's outputs filled the grader's record"


def _cut(text, limit: int = MAX_TEXT) -> str:
    text = text if isinstance(text, str) else "".join(text) if isinstance(text, list) else str(text)
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit:,} characters cut]\n"


def _plain(outputs, essentials: bool = False) -> list:
    """Outputs reduced to what scoring needs (streams, text/plain, errors, the grader's answers), each
    text cut to :data:`MAX_TEXT` characters, :data:`CELL_TEXT` in all; with ``essentials``, only the
    errors and the answers messages."""
    plain, text, answers, dropped = [], 0, 0, 0
    for out in (outputs or [])[:10_000]:
        kind = out.get("output_type")
        data = out.get("data") or {}
        if kind in ("execute_result", "display_data") and ANSWERS_MIME in data:
            answers += 1
            if answers <= ANSWERS_KEPT:
                plain.append({"output_type": kind, "data": {"text/plain": "", ANSWERS_MIME: data[ANSWERS_MIME]}})
            continue
        if kind == "error":
            limit = 1000 if essentials else MAX_TEXT
            plain.append(
                {"output_type": kind, "ename": _cut(out.get("ename"), limit), "evalue": _cut(out.get("evalue"), limit)}
            )
            continue
        if essentials or text >= CELL_TEXT:
            dropped += kind in ("stream", "execute_result", "display_data")
            continue
        if kind == "stream":
            entry = {"output_type": kind, "name": out.get("name"), "text": _cut(out.get("text", ""))}
            text += len(entry["text"])
        elif kind in ("execute_result", "display_data"):
            entry = {"output_type": kind, "data": {"text/plain": _cut(data.get("text/plain", ""))}}
            text += len(entry["data"]["text/plain"])
        else:
            continue
        plain.append(entry)
    if answers > ANSWERS_KEPT:  # a third and later message: still said, so that a forgery stays visible
        plain.append(
            {
                "output_type": "display_data",
                "data": {
                    "text/plain": "",
                    ANSWERS_MIME: {"cell": None, "answers": f"{answers - ANSWERS_KEPT} more answers messages not kept"},
                },
            }
        )
    if dropped:
        plain.append(
            {"output_type": "stream", "name": "stdout", "text": f"[... {dropped:,} outputs not kept by the grader]\n"}
        )
    return plain


_WIDGET = "application/vnd.jupyter.widget-view+json"


def place_independent(outputs) -> list:
    """A cell's outputs without those that depend on where it ran, which the grader does not compare.

    Dropped: stderr (warnings, hub download lines, transformers' load reports, version banners),
    widget displays (progress bars such as "Loading weights"), figures (an image, shown by the
    student's notebook backend; the sealed run draws with Agg and shows none) and the grader's own
    answers message.
    What a task computes is printed to stdout or displayed as data, and that is still compared.
    """
    return [
        o
        for o in outputs
        if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
        and _WIDGET not in (o.get("data") or {})
        and ANSWERS_MIME not in (o.get("data") or {})
        and not any(kind.startswith("image/") for kind in (o.get("data") or {}))
    ]


def shown(outputs, source: str) -> list:
    """The outputs Jupyter shows of a cell of ``source``: none of its result where the code ends with ``;``.
    IPython decides that from the history of inputs, which nbval does not keep (it runs each cell with
    ``store_history=False``): the re-run showed a result (``model.eval();``) the student never saw."""
    import tokenize

    try:
        from IPython.core.displayhook import DisplayHook

        quiet = DisplayHook.semicolon_at_end_of_expression(source)
    except (ImportError, AttributeError, tokenize.TokenError, SyntaxError, ValueError):
        quiet = False
    return [
        o
        for o in outputs or []
        if not (quiet and o.get("output_type") == "execute_result" and ANSWERS_MIME not in (o.get("data") or {}))
    ]


def _place_independent_compare(original, source: str):
    def compare_outputs(test, ref, skip_compare=None):
        return original(place_independent(shown(test, source)), place_independent(ref), skip_compare)

    return compare_outputs


def _first_difference(item) -> tuple[str, str]:
    """The first line (sanitized) where a cell's stored output and its re-run output differ."""
    from itertools import zip_longest

    from nbval.plugin import coalesce_streams

    def lines(outputs):
        return item.sanitize(
            output_text(
                nbformat.from_dict(
                    {"outputs": coalesce_streams([nbformat.from_dict(copy.deepcopy(dict(o))) for o in outputs])}
                )
            )
        ).splitlines()

    for stored, rerun in zip_longest(
        lines(place_independent(item.cell.outputs)),
        lines(place_independent(shown(item.test_outputs, item.cell.source))),
        fillvalue="(nothing)",
    ):
        if stored != rerun:
            return stored[:100], rerun[:100]
    return "(an output that is not text)", "(a different one)"


def _use_kernel(spec: dict) -> None:
    """nbval starts its kernels from ``argv`` and talks to them over Unix sockets (ZeroMQ ``ipc``):
    a kernel in its own network namespace has no TCP path to the grader."""
    import nbval.kernel
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager

    runtime = Path(os.environ["JUPYTER_RUNTIME_DIR"])  # the run's folder both sides see

    class SandboxKernelManager(KernelManager):
        def __init__(self, **kwargs):
            super().__init__(
                transport="ipc", ip=str(runtime / "kernel-ipc"), connection_file=str(runtime / "kernel.json"), **kwargs
            )

    def get_kernel_spec(self, kernel_name):
        return KernelSpec(
            argv=spec["argv"],
            env=spec["env"],
            display_name="Python 3 (grading sandbox)",
            language="python",
            interrupt_mode="message",
        )

    nbval.kernel.KernelManager = SandboxKernelManager
    nbval.kernel.NbvalKernelspecManager.get_kernel_spec = get_kernel_spec


def process_tree(pid) -> list:
    """A process and all its descendants (psutil processes; empty when it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return []


def inside(tree):
    """A process of the run inside the sandbox (its kernel), through which the grader sees the
    sandbox's own file system (``/proc/PID/root``); None before the kernel starts."""
    import psutil

    for p in tree[1:]:
        try:
            if (
                p.name() != "bwrap"
                and any("ipykernel" in part for part in p.cmdline())
                and os.path.isdir(f"/proc/{p.pid}/root/sandbox")
            ):
                return p
        except (psutil.Error, OSError):
            pass
    return None


def file_sizes(where: list | str) -> tuple[set, set]:
    """The sizes of the files now in a run's writable space: the sandbox's own file systems, seen
    through its kernel (``where == "sandbox"``), or the given folders; and those of them (of a MiB or more)
    that no saved model has (:func:`~bertfamily.grading.trees.saved`)."""
    from bertfamily.grading import trees

    sizes: set[int] = set()
    formats: dict[int, bool] = {}
    if where == "sandbox":
        kernel = inside(process_tree(os.getpid()))
        roots = [f"/proc/{kernel.pid}/root/.", f"/proc/{kernel.pid}/root/dev/shm/."] if kernel else []
    else:
        roots = list(where)
    for root in roots:
        try:
            trees.measure(root, max_entries=20_000, max_depth=64, sizes=sizes, one_filesystem=True, formats=formats)
        except (trees.TooLarge, OSError):  # a deep or wide tree stopped the walk: the top levels still count
            try:
                trees.measure(
                    root, max_entries=20_000, max_depth=4, sizes=sizes, one_filesystem=True, prune=True, formats=formats
                )
            except (trees.TooLarge, OSError):
                pass
    return sizes, {size for size, model in formats.items() if not model}


def main(argv) -> int:
    """Run one notebook under pytest + nbval; append one JSON line per cell to the record file."""
    import pytest

    record, notebook, cell_timeout, sanitize, ini, kernel, sizes_from = argv
    _use_kernel(json.loads(Path(kernel).read_text(encoding="utf-8")))
    sizes_from = json.loads(sizes_from)

    class Recorder:
        def __init__(self, stream):
            self.stream, self.written, self.seen = stream, 0, set()

        def write(self, **entry):
            line = json.dumps(entry, ensure_ascii=False) + "\n"
            if self.written + len(line.encode()) > RECORD_MAX - 2**10:
                line = json.dumps({"full": FULL}) + "\n"
                self.written = RECORD_MAX
            else:
                self.written += len(line.encode())
            self.stream.write(line)
            self.stream.flush()
            return self.written < RECORD_MAX

        def pytest_collection_modifyitems(self, items):
            for item in items:
                if hasattr(item, "output_timeout"):
                    item.output_timeout = OUTPUT_TIMEOUT_S
                if hasattr(item, "compare_outputs"):
                    item.compare_outputs = _place_independent_compare(item.compare_outputs, item.cell.source)

        def pytest_runtest_logstart(self, nodeid, location):
            if self.written < RECORD_MAX:
                self.write(start=int(nodeid.rsplit("Cell ", 1)[-1]))

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            yield
            if call.when == "teardown" or (call.when == "setup" and call.excinfo is None):
                return  # a cell's result is its call; a setup is recorded only when it failed
            if self.written >= RECORD_MAX:
                item.session.shouldstop = FULL
                return
            exc = call.excinfo.value if call.excinfo else None
            source = item.cell.source if hasattr(item, "cell") else ""
            skipped = call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception)
            entry = {
                "cell": item.cell_num,
                "phase": call.when,
                "outcome": "skipped" if skipped else "failed" if exc is not None else "passed",
                "message": _cut((str(exc).strip().splitlines() or [type(exc).__name__])[0], 1000) if exc else "",
                "outputs": _plain(shown(getattr(item, "test_outputs", None), source), self.written > RECORD_SOFT),
            }
            if entry["message"] == "Cell outputs differ":
                entry["stored"], entry["rerun"] = _first_difference(item)
            if entry["message"].startswith("Timeout"):
                item.session.shouldstop = "a cell timed out"  # the kernel was interrupted: stop here
            if call.when == "call":
                now, unsaved = file_sizes(sizes_from)
                entry["sizes"] = sorted(now - self.seen)[:MAX_SIZES]
                entry["unsaved"] = sorted(unsaved & (now - self.seen))[:MAX_SIZES]  # no saved model's size
                self.seen |= now
            if not self.write(**entry):
                item.session.shouldstop = FULL

    with open(record, "w", encoding="utf-8") as stream:
        return pytest.main(
            [
                notebook,
                "-c",
                ini,
                "--rootdir",
                str(Path(ini).parent),
                "-p",
                "nbval.plugin",
                "-p",
                "no:cacheprovider",
                "--noconftest",
                "-q",
                "--tb=short",
                "--color=no",
                "--nbval",
                "--nbval-current-env",
                "--nbval-sanitize-with",
                sanitize,
                f"--nbval-cell-timeout={cell_timeout}",  # a loaded machine starts kernels slowly
                f"--nbval-kernel-startup-timeout={max(60.0, float(cell_timeout)):g}",
            ],
            plugins=[Recorder(stream)],
        )


def records(path) -> tuple[list[int], dict, bool]:
    """The cells a run started, its per-cell results (by nbval's code-cell number), and whether its
    record filled up; read line by line, never whole."""
    started: list[int] = []
    results: dict[int, dict] = {}
    full = False
    try:
        stream = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return started, results, full
    with stream:
        for line in stream:
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue  # a line cut short by a kill
            if not isinstance(entry, dict):
                continue
            if "start" in entry:
                started.append(entry["start"])
            elif "cell" in entry:
                results[entry["cell"]] = entry
            elif "full" in entry:
                full = True
    return started, results, full


def pending(record) -> int | None:
    """The code cell that was running when the record stopped (None: none was)."""
    last, done = None, set()
    try:
        stream = open(record, encoding="utf-8", errors="replace")
    except OSError:
        return None
    with stream:
        for line in stream:
            if line.startswith('{"start"'):
                try:
                    last = json.loads(line)["start"]
                except (ValueError, KeyError, TypeError):
                    pass
            elif line.startswith('{"cell"'):
                try:
                    done.add(int(line[8 : line.index(",")]))
                except ValueError:
                    pass
    return last if last is not None and last not in done else None
