"""One exercise notebook, two outputs: the solution (the book's page) and the student version; and a regrade.

    python -m bertfamily.grading student SOURCE.ipynb DEST.ipynb [--force]
    python -m bertfamily.grading grade NOTEBOOK.ipynb [--timeout 600] [--json]
    bertfamily-grade SUBMISSION... --out gradebook.csv [--force] [--jobs N]   (a whole class)

``bertfamily-grade`` (the same as ``python -m bertfamily.grading SUBMISSION...``) regrades a class
under nbval, each submission in its own sandboxed run; see :func:`grade_class` and the README's
instructor section.

Cell tag convention (cell metadata ``tags``), read from the solution notebook:

``solution`` on a **code** cell
    The cell is the reference answer. In the student version its code is replaced by a placeholder:
    the comment lines at the top of the cell (the instruction) are kept, then one line
    ``NAME = None  # YOUR CODE HERE`` for each *answer* the checks read, so that an unanswered task
    reaches its check as ``None`` and gets a hint, not a ``NameError``. The answers are the names in
    the cell's metadata ``"answers"`` (a list) if present, otherwise every name assigned at the top
    level of the cell. A cell that assigns nothing becomes ``# YOUR CODE HERE``.
``solution`` on a **markdown** cell
    Dropped from the student version: the sphinx-exercise solution markup (``{solution-start}`` /
    ``{solution-end}`` gated directives that wrap the solution code cell in a dropdown on the website)
    and any prose that explains the answer. The generator refuses a source where a markdown cell that
    is *not* tagged ``solution`` contains a ``{solution`` directive, so an answer cannot leak by a
    forgotten tag.
``check`` on a code cell
    A call into :mod:`bertfamily.checks`; kept as it is. ``grade`` reads the ``✓`` / ``✗`` lines that
    these cells print.

Every other cell is kept; outputs and execution counts are cleared, widget state is dropped, and cell
ids are kept (so :func:`restore_solutions` can put the reference answers back, cell by cell).

``student`` never writes to SOURCE, and refuses to overwrite an existing DEST whose content differs
from what it would write unless ``--force`` is given (rewriting an identical file is a no-op).
``grade`` executes a *copy* of a notebook in a temporary folder and prints one line per check; the
student's file is only read, never modified.
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat
import nbformat.v4

from bertfamily import kernels

SOLUTION, CHECK = "solution", "check"
PLACEHOLDER = "# YOUR CODE HERE"
_SOLUTION_DIRECTIVE = re.compile(r"[`:]{3,}\s*\{solution")
_MARK = re.compile(r"^\s*([✓✗])\s+(.*?):\s*(.*)$")


def _tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []))


def answers(cell) -> list[str]:
    """The names a solution code cell must leave defined: metadata ``answers`` or its top-level assignments."""
    listed = cell.get("metadata", {}).get("answers")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(n, str) and n.isidentifier() for n in listed):
            raise ValueError(f"cell {cell.get('id')}: metadata 'answers' must be a list of variable "
                             f"names, got {listed!r}")
        return list(listed)
    try:
        tree = ast.parse(cell.source)
    except SyntaxError as exc:
        raise ValueError(f"solution cell {cell.get('id')} is not valid Python: {exc}") from exc
    names = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.append(sub.id)
    return names


def placeholder(cell) -> str:
    """The student's version of a solution code cell (see the module docstring)."""
    lines = cell.source.splitlines()
    head = []
    for line in lines:
        if line.strip().startswith("#"):
            head.append(line)
        else:
            break
    body = [f"{name} = None  {PLACEHOLDER}" for name in answers(cell)] or [PLACEHOLDER]
    return "\n".join(head + body)


def student_version(nb):
    """A new notebook: solutions replaced by placeholders, solution markdown dropped, outputs cleared."""
    out = copy.deepcopy(nb)
    cells = []
    for index, cell in enumerate(out.cells):
        solution = SOLUTION in _tags(cell)
        if cell.cell_type == "markdown":
            if solution:
                continue
            if _SOLUTION_DIRECTIVE.search(cell.source):
                raise ValueError(f"markdown cell {index} (id {cell.get('id')}) holds a solution "
                                 f"directive but is not tagged {SOLUTION!r}: tag it, or the answer "
                                 "would reach the student version")
        if cell.cell_type == "code":
            if solution:
                cell.source = placeholder(cell)
                cell.metadata.pop("answers", None)
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
        if "tags" in cell.metadata:
            kept = [t for t in cell.metadata["tags"] if t != SOLUTION]
            if kept:
                cell.metadata["tags"] = kept
            else:
                del cell.metadata["tags"]
        cells.append(cell)
    out.cells = cells
    out.metadata.pop("widgets", None)
    return out


def restore_solutions(student_nb, solution_nb):
    """A copy of ``student_nb`` with every solution code cell put back from ``solution_nb`` (by cell id)."""
    reference = {c.get("id"): c for c in solution_nb.cells
                 if c.cell_type == "code" and SOLUTION in _tags(c)}
    out = copy.deepcopy(student_nb)
    for cell in out.cells:
        if cell.get("id") in reference:
            cell.source = reference[cell.get("id")].source
    return out


def _text(nb) -> str:
    return nbformat.writes(nb) + "\n"


def write_student(source, dest, force: bool = False) -> str:
    """Write the student version of ``source`` to ``dest``; return ``"written"`` or ``"unchanged"``.

    Raises ValueError when ``dest`` is ``source``, or when ``dest`` exists with other content and
    ``force`` is false.
    """
    source, dest = Path(source), Path(dest)
    if not source.is_file():
        raise ValueError(f"no notebook at {source}")
    if dest.resolve() == source.resolve():
        raise ValueError(f"DEST is the solution notebook itself ({source}): choose another path")
    nb = nbformat.read(source, as_version=4)
    text = _text(student_version(nb))
    if dest.exists():
        if dest.read_text(encoding="utf-8") == text:
            return "unchanged"
        if not force:
            raise ValueError(f"{dest} exists and differs from the student version of {source}; "
                             "pass --force to overwrite it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, dest)
    return "written"


@dataclass
class CheckResult:
    task: str
    passed: bool
    message: str
    cell: int
    hint: str = ""


def _output_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def report(nb) -> list[CheckResult]:
    """The check results an executed notebook shows, one per ``✓`` / ``✗`` line of its check cells.

    A check cell that raised, or printed no mark, counts as a failed check.
    """
    results = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or CHECK not in _tags(cell):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        marks = 0
        for line in _output_text(cell).splitlines():
            m = _MARK.match(line)
            if m:
                marks += 1
                results.append(CheckResult(m.group(2), m.group(1) == "✓", m.group(3), index))
            elif marks and line.strip().startswith("hint:"):
                hint = line.strip()[len("hint:"):].strip()
                results[-1].hint = f"{results[-1].hint} {hint}".strip()
        if errors:
            e = errors[0]
            results.append(CheckResult(f"cell {index}", False, f"error {e.get('ename')}: {e.get('evalue')}", index))
        elif not marks:
            results.append(CheckResult(f"cell {index}", False, "the check printed no result", index))
    return results


def execute_copy(path, timeout: int = 600, kernel_name: str = "python3"):
    """Execute a copy of the notebook at ``path`` in a temporary folder; return the executed notebook.

    The file at ``path`` is only read (its bytes and modification time are unchanged); errors in
    cells do not stop the run, they are recorded in the outputs.
    """
    from nbclient import NotebookClient

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no notebook at {path}")
    data = path.read_bytes()
    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    with tempfile.TemporaryDirectory(prefix="bertfamily-grade-") as tmp:
        (Path(tmp) / path.name).write_bytes(data)
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, allow_errors=True,
                                resources={"metadata": {"path": tmp}})
        client.execute()
    return nb


def grade(path, timeout: int = 600, kernel_name: str = "python3") -> list[CheckResult]:
    """Execute a copy of the notebook at ``path`` (see :func:`execute_copy`) and return its check results."""
    return report(execute_copy(path, timeout=timeout, kernel_name=kernel_name))


def _print_report(results, stream=sys.stdout) -> None:
    width = max((len(r.task) for r in results), default=4)
    for r in results:
        print(f"{'✓' if r.passed else '✗'} {r.task:<{width}}  {r.message}", file=stream)
        if r.hint:
            print(f"  {'':<{width}}  hint: {r.hint}", file=stream)
    passed = sum(r.passed for r in results)
    print(f"{passed}/{len(results)} checks passed", file=stream)


# ------------------------------------------------------------------ regrading a class: the gradebook
#
# Each submission is checked (readable notebook? this exercise?), then a prepared copy runs under
# nbval in a fresh temporary folder, in its own process tree watched for time, memory and kernel
# death; the per-cell results that nbval reports are scored task by task. The submitted file is
# only ever read.

ROOT = Path(__file__).resolve().parents[2]
#: The course's solution notebook: it defines the tasks (and is graded like any submission).
REFERENCE = ROOT / "book" / "exercise_distilbert.ipynb"
#: The nbval sanitizers that ``make test`` uses.
SANITIZE = ROOT / "tests" / "sanitize.cfg"
STATUSES = ("graded", "invalid", "timeout", "error")
MAX_NOTEBOOK_BYTES = 50 * 2**20
OUTPUT_TIMEOUT_S = 60  # nbval's wait for a finished cell's output messages (as the root conftest.py)
POLL_S = 0.1
#: Where a model came from is not compared: a student online saw "loaded ... from the Hugging Face
#: hub", the grader (offline) prints "no model hub here: built ..." (bertfamily.models.load_pretrained).
MODEL_SOURCE = (r"(loaded \S+ from the Hugging Face hub \(pretrained weights\)|(the hub was reachable but "
                r"the download failed \(\w+\); )?no model hub here: built \S+ from its published "
                r"configuration[^\n]*)", "MODEL SOURCE")
#: nbval's cell tags and comment markers: the grader, not the submission, decides which outputs count.
NBVAL_TAGS = {"nbval-ignore-output", "nbval-check-output", "nbval-raises-exception", "raises-exception",
              "nbval-skip", "pytest-validate-ignore-output"}
_NBVAL_COMMENT = re.compile(r"^[ \t]*#[ \t]*(NBVAL_[A-Z_]+|PYTEST_VALIDATE_IGNORE_OUTPUT)[ \t]*$", re.M)
_EXERCISE = re.compile(r"^[`:]{3,}\s*\{exercise\}\s*(.*?)\s*$", re.M)
_KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ")


class Invalid(ValueError):
    """A submission that cannot be graded: not a readable notebook, or not this exercise."""


@dataclass(frozen=True)
class Task:
    """One task of the exercise: the ids of its solution and check code cells, as the reference has them."""
    name: str
    title: str
    cells: tuple
    checks: tuple  # (cell id, source) of each check cell
    graded: bool


@dataclass(frozen=True)
class Limits:
    """Per-cell and per-notebook time limits (seconds) and the memory limit of one run (MiB)."""
    cell_timeout: float = 120
    timeout: float = 900
    memory_mib: int = 4096
    threads: int | None = None  # torch threads per kernel; None: the pinned default (kernels.PINNED)


@dataclass
class Row:
    """One line of the gradebook."""
    submission: str
    status: str
    score: int | None
    max_score: int
    tasks: dict
    detail: str


def exercise_tasks(reference) -> list[Task]:
    """The tasks of an exercise notebook: one per ``{exercise}`` directive, in order (``task1``, ...).

    A task holds the code cells tagged ``solution`` or ``check`` that follow its directive. A task
    whose check cells are all tagged ``nbval-ignore-output`` (a timing: its verdict depends on the
    machine) is not graded, and its cells are not run.
    """
    groups = []
    for cell in reference.cells:
        found = _EXERCISE.search(cell.source) if cell.cell_type == "markdown" else None
        if found:
            groups.append((found.group(1), [], []))
        elif cell.cell_type == "code" and ({SOLUTION, CHECK} & set(_tags(cell))):
            if not groups:
                raise ValueError(f"code cell {cell.get('id')} is tagged {_tags(cell)} before any "
                                 "{exercise} directive of the reference notebook")
            if not cell.get("id"):
                raise ValueError("the reference notebook's cells have no ids (nbformat 4.5 or later)")
            groups[-1][1].append(cell.id)
            if CHECK in _tags(cell):
                groups[-1][2].append(cell)
    tasks = []
    for number, (title, cells, checks) in enumerate(groups, 1):
        if not checks:
            raise ValueError(f"exercise {number} ({title}) of the reference notebook has no check cell")
        graded = not all("nbval-ignore-output" in _tags(c) for c in checks)
        tasks.append(Task(f"task{number}", title, tuple(cells), tuple((c.id, c.source) for c in checks),
                          graded))
    if not tasks:
        raise ValueError("the reference notebook has no {exercise} directive with check cells")
    return tasks


def read_submission(data: bytes, tasks, reference_name: str = "the exercise"):
    """The notebook in ``data``, or :class:`Invalid` saying why it cannot be graded."""
    if not data.strip():
        raise Invalid("empty file")
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise Invalid(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB: not a notebook of {reference_name}")
    try:
        content = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise Invalid("not a notebook: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise Invalid(f"not a notebook: invalid JSON ({exc})") from None
    except RecursionError:
        raise Invalid("not a notebook: JSON nested too deeply") from None
    if not isinstance(content, dict) or content.get("nbformat") != 4:
        raise Invalid("not a notebook: JSON without 'nbformat': 4 (Jupyter notebooks since 2015 have it)")
    try:
        with warnings.catch_warnings():  # nbformat warns about what it would fix; only errors count
            warnings.simplefilter("ignore")
            nbformat.validate(content)  # the schema of the file as it is
        nb = nbformat.v4.to_notebook_json(content)  # sources and texts joined, as nbformat.read does
    except Exception as exc:  # nbformat raises several kinds; any of them means "cannot read this"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Invalid(f"not a valid notebook: {first}") from None
    ids = {c.get("id") for c in nb.cells}
    checks = [cid for t in tasks for cid, _ in t.checks]
    if not ids & set(checks):
        raise Invalid(f"not this exercise: none of the {len(checks)} check cells of {reference_name} "
                      "is in it (the grader knows them by cell id, which Jupyter keeps)")
    return nb


def prepare(nb, reference, tasks):
    """The copy that runs: nbval tags and comment markers as the reference has them, ungraded tasks skipped.

    A submission cannot exempt a cell from the output comparison: its own nbval tags and
    ``# NBVAL_...`` comment lines are dropped and the reference's tags for the same cell id applied.
    Check cells are restored from the reference by id (an edit of one cannot change its verdict;
    the gradebook notes what was restored).
    """
    ref_tags = {c.get("id"): [t for t in _tags(c) if t in NBVAL_TAGS]
                for c in reference.cells if c.cell_type == "code"}
    skipped = {cid for t in tasks if not t.graded for cid in t.cells}
    checks = {cid: source for t in tasks for cid, source in t.checks}
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type != "code":
            continue
        if cell.get("id") in checks:  # a stray keystroke in a check cell: the course's check runs
            cell.source = checks[cell.get("id")]
        tags = [t for t in _tags(cell) if t not in NBVAL_TAGS] + ref_tags.get(cell.get("id"), [])
        if cell.get("id") in skipped:
            tags.append("nbval-skip")
        cell.source = _NBVAL_COMMENT.sub("", cell.source)
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
    return out


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

_WORKER = "import sys; from bertfamily.grading import _nbval_worker; sys.exit(_nbval_worker(sys.argv[1:]))"


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


def run_sandboxed(nb, limits: Limits, sanitize: str) -> dict:
    """Run ``nb`` under nbval in a new temporary folder; return what happened, cell by cell.

    The notebook is written as ``work/submission.ipynb`` (the kernel's working directory), the
    grader's own files sit next to ``work/``, HOME and every cache are inside the folder, and the
    whole folder is deleted afterwards. Returns ``{"status": "" | "timeout" | "error", "reason",
    "cell" (the code-cell number running when the run was stopped), "results" (per code-cell
    number), "exit_code", "log", "peak_mib"}``.
    """
    with tempfile.TemporaryDirectory(prefix="bertfamily-grade-", ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        for sub in ("work", "home", "tmp"):
            (folder / sub).mkdir()
        notebook, record = folder / "work" / "submission.ipynb", folder / "record.jsonl"
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
    return {"status": status, "reason": reason, "cell": cell, "results": results,
            "exit_code": proc.returncode, "log": log, "peak_mib": peak[0] / 2**20}


# --- scoring

@dataclass(frozen=True)
class Exercise:
    """The exercise a class is graded on: its reference (solution) notebook and its tasks."""
    name: str
    reference: nbformat.NotebookNode
    tasks: tuple

    @classmethod
    def load(cls, path=REFERENCE) -> "Exercise":
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"no reference notebook at {path}: pass --reference SOLUTION.ipynb")
        reference = nbformat.read(path, as_version=4)
        return cls(path.name, reference, tuple(exercise_tasks(reference)))

    @property
    def graded(self) -> list[Task]:
        return [t for t in self.tasks if t.graded]


def _owners(nb, exercise: Exercise) -> dict:
    """The task name (or None) of each code cell, by index: reference cells by their id; a cell the
    student added belongs to the task of the next reference cell, if that one is in a task."""
    task_of = {cid: t.name for t in exercise.tasks for cid in t.cells}
    known = {c.get("id") for c in exercise.reference.cells}
    owners, added = {}, []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("id") in known:
            owners[index] = task_of.get(cell.get("id"))
            owners.update(dict.fromkeys(added, owners[index]))
            added = []
        else:
            added.append(index)
    owners.update(dict.fromkeys(added))
    return owners


def _problem(index, entry, cell_timeout) -> str | None:
    """What went wrong in one cell's nbval result, in words; None when it passed or was skipped."""
    if entry["outcome"] != "failed":
        return None
    message = entry["message"]
    if message == "Cell outputs differ":
        return (f"the stored output of cell {index} does not reproduce (stored {entry['stored']!r}, "
                f"re-run {entry['rerun']!r})")
    if message.startswith("Timeout"):
        return f"cell {index} ran past the per-cell limit of {cell_timeout:g} s"
    if "Kernel dead" in message:
        return f"cell {index} did not run: the kernel had died"
    errors = [o for o in entry["outputs"] if o["output_type"] == "error"]
    if errors:  # a SyntaxError names the kernel's temporary file of the cell: keep only the line
        evalue = re.sub(r"\([^()]*\.py, line (\d+)\)", r"(line \1)", str(errors[0]["evalue"]))
        return f"cell {index} raised {errors[0]['ename']}: {evalue}"[:200]
    return f"cell {index}: {message}"[:200]


def _check_problems(cell, outputs) -> list[str]:
    """The failed marks of one check cell's re-run outputs (its errors are reported as cell problems)."""
    rerun = nbformat.from_dict({"cell_type": "code", "source": cell.source, "metadata": {"tags": [CHECK]},
                                "outputs": outputs})
    found = []
    for r in report(nbformat.from_dict({"cells": [rerun]})):
        if r.passed or r.message.startswith("error"):
            continue
        found.append("its check printed no result" if r.task.startswith("cell ")
                     else f"✗ {r.task}: {r.message}"[:200])
    return found


def score_run(nb, exercise: Exercise, run: dict, limits: Limits) -> tuple[str, dict, list[str]]:
    """Status, marks per graded task (1 passed, 0 not) and the problems in words, from a run of ``nb``.

    A task passes when every cell of it ran without error, its stored outputs reproduced under
    nbval, its check cells are the reference's, and every check prints ``✓`` on the re-run.
    """
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]  # nbval's cell number -> index
    results = {code[n]: entry for n, entry in run["results"].items() if 0 <= n < len(code)}
    status, problems = "graded", []
    if run["status"]:
        status = run["status"]
        cell = run["cell"]
        where = f" (in cell {code[cell]})" if cell is not None and 0 <= cell < len(code) else ""
        problems.append(f"{status}: {run['reason']}{where}")
    elif any(e["phase"] == "setup" for e in results.values()):
        status = "error"
        first = next(e for e in results.values() if e["phase"] == "setup")
        problems.append(f"error: the kernel did not start ({first['message']})"[:300])
    elif any(e["message"].startswith("Timeout") for e in results.values()):
        status = "timeout"  # nbval's per-cell limit; the worker stopped there (pytest exit code 2)
    elif run["exit_code"] not in (0, 1) or not results:
        status = "error"
        last = (run["log"].strip().splitlines() or ["no output"])[-1]
        problems.append(f"error: the grading run failed (pytest exit code {run['exit_code']}): {last}"[:300])
    elif any("Kernel dead" in e["message"] for e in results.values()):
        status = "error"
        problems.append("error: the kernel died")
    owners = _owners(nb, exercise)
    by_id = {c.get("id"): (i, c) for i, c in enumerate(nb.cells)}
    marks, notes = {}, []
    for task in exercise.graded:
        found, reached, checks = [], True, dict(task.checks)
        for cid, source in checks.items():
            if cid not in by_id:
                found.append("its check cell was deleted")
            elif by_id[cid][1].source != source:
                notes.append(f"{task.name}: its check cell (cell {by_id[cid][0]}) was edited; "
                             "the course's check was restored and run")
        for index in (i for i in code if owners.get(i) == task.name):
            if index not in results:  # the run stopped before it (the status says why)
                reached = False
                continue
            found.extend(p for p in [_problem(index, results[index], limits.cell_timeout)] if p)
            cell = nb.cells[index]
            if cell.get("id") in checks:  # read with the source that ran: the course's (prepare)
                found.extend(_check_problems(nbformat.from_dict({**cell, "source": checks[cell.get("id")]}),
                                             results[index]["outputs"]))
        if not reached and status == "graded":
            found.append("not all of its cells ran")
        marks[task.name] = 1 if reached and not found else 0
        problems.extend(f"{task.name}: {p}" for p in found)
    for index in code:
        if owners.get(index) is None and index in results:
            problem = _problem(index, results[index], limits.cell_timeout)
            if problem:
                problems.append(f"not in a task: {problem}")
    return status, marks, problems + notes


def _sanitizers(path=SANITIZE) -> str:
    """The nbval sanitize file of a run: the grader's own pattern first, then the course's."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no nbval sanitize file at {path}: pass --sanitize FILE")
    regex, replace = MODEL_SOURCE
    return f"[grading-model-source]\nregex: {regex}\nreplace: {replace}\n\n" + path.read_text(encoding="utf-8")


def grade_submission(path, display: str, exercise: Exercise, limits: Limits, sanitize: str) -> Row:
    """Grade one submitted file (only read, never written): its gradebook row."""
    empty = dict.fromkeys((t.name for t in exercise.graded), None)
    max_score = len(exercise.graded)
    try:
        data = Path(path).read_bytes()
        nb = read_submission(data, exercise.tasks, exercise.name)
    except (Invalid, OSError) as exc:
        reason = str(exc) if isinstance(exc, Invalid) else f"cannot read the file ({exc.strerror})"
        return Row(display, "invalid", None, max_score, empty, reason)
    run = run_sandboxed(prepare(nb, exercise.reference, exercise.tasks), limits, sanitize)
    status, marks, problems = score_run(nb, exercise, run, limits)
    return Row(display, status, sum(marks.values()), max_score, marks, "; ".join(problems))


def collect(paths) -> list[tuple[Path, str]]:
    """The files to grade, as (path, name in the gradebook): each file given, and every ``*.ipynb``
    under each folder given (``.ipynb_checkpoints`` left out), once each, sorted by name."""
    found = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            members = [p for p in path.rglob("*.ipynb") if p.is_file() and ".ipynb_checkpoints" not in p.parts]
            if not members:
                raise ValueError(f"nothing to grade in {given}: the folder holds no .ipynb file")
        elif path.is_file():
            members = [path]
        elif path.exists():
            raise ValueError(f"{given} is neither a file nor a folder")
        else:
            raise ValueError(f"no such file or folder: {given}")
        for member in members:
            found.setdefault(member.resolve(), (member, str(member)))
    if not found:
        raise ValueError("nothing to grade: give notebooks or folders of notebooks")
    return sorted(found.values(), key=lambda item: item[1])


def _grade_one(args) -> Row:
    return grade_submission(*args)


def grade_class(paths, exercise: Exercise | None = None, limits: Limits = Limits(), jobs: int = 1,
                sanitize=SANITIZE, progress: bool = True) -> list[Row]:
    """Grade every submission under ``paths`` (see :func:`collect`), ``jobs`` at a time; rows sorted
    by submission, so the gradebook does not depend on the order given or on ``jobs``."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    import multiprocessing

    from tqdm.auto import tqdm

    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    import importlib.util
    missing = [m for m in ("pytest", "nbval", "psutil") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"the grader needs {', '.join(missing)}: install the test extras "
                         "(pip install -e '.[test]', as make setup does)")
    exercise = exercise or Exercise.load()
    sanitizers = _sanitizers(sanitize)
    found = collect(paths)
    if limits.threads is None:  # share the cores between the kernels that run at once
        limits = dataclasses.replace(limits, threads=max(1, _cores() // max(1, min(jobs, len(found)))))
    work = [(path, name, exercise, limits, sanitizers) for path, name in found]
    rows = []
    with tqdm(total=len(work), desc="grading", unit="notebook", disable=not progress,
              file=sys.stderr) as bar:
        if jobs == 1:
            for args in work:
                rows.append(_grade_one(args))
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=min(jobs, len(work)),
                                     mp_context=multiprocessing.get_context("spawn")) as pool:
                for future in as_completed([pool.submit(_grade_one, args) for args in work]):
                    rows.append(future.result())
                    bar.update()
    return sorted(rows, key=lambda r: r.submission)


def gradebook_fields(exercise: Exercise) -> list[str]:
    return ["submission", "status", "score", "max_score", *(t.name for t in exercise.graded), "detail"]


def write_gradebook(rows, exercise: Exercise, out, force: bool = False) -> None:
    """Write the CSV atomically (a temporary file in the same folder, then a rename); an existing
    ``out`` is replaced only with ``force``."""
    import csv

    out = Path(out)
    if out.exists() and not force:
        raise ValueError(f"{out} exists; pass --force to overwrite it")
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", dir=out.parent,
                                         prefix=f".{out.name}.", suffix=".tmp", delete=False)
    try:
        with handle:
            writer = csv.writer(handle)
            writer.writerow(gradebook_fields(exercise))
            for r in rows:
                marks = ["" if r.tasks.get(t.name) is None else r.tasks[t.name] for t in exercise.graded]
                writer.writerow([r.submission, r.status, "" if r.score is None else r.score, r.max_score,
                                 *marks, r.detail])
            handle.flush()
            os.fsync(handle.fileno())
        if out.exists() and not force:
            raise ValueError(f"{out} appeared while grading; pass --force to overwrite it")
        os.replace(handle.name, out)
    finally:
        if os.path.exists(handle.name):
            os.unlink(handle.name)


def summary(rows, exercise: Exercise) -> str:
    """The table printed at the end: per graded task, how many of the submissions that ran passed it."""
    ran = [r for r in rows if r.status != "invalid"]
    width = max(len(t.name) for t in exercise.tasks)
    lines = [f"{'task':<{width}}  passed  title"]
    for t in exercise.tasks:
        if t.graded:
            passed = f"{sum(r.tasks[t.name] or 0 for r in ran)}/{len(ran)}"
            lines.append(f"{t.name:<{width}}  {passed:>6}  {t.title}")
        else:
            lines.append(f"{t.name:<{width}}  {'-':>6}  {t.title} (not graded: its result depends on the machine)")
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    lines.append(f"{len(rows)} submissions: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return "\n".join(lines)


#: What one grading job needs: the kernel of the exercise with BERT-base and DistilBERT, and nbval.
JOB_MIB = 1843


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _jobs_default() -> int:
    """One job per core, but no more than the free memory holds (about 1.8 GiB each)."""
    import psutil
    return max(1, min(_cores(), int(psutil.virtual_memory().available / 2 ** 20 // JOB_MIB)))


def _main_gradebook(argv) -> int:
    parser = argparse.ArgumentParser(
        prog="bertfamily-grade",
        description="Regrade a class: re-execute each submission under nbval in a sandbox and write a "
                    "gradebook (CSV). Other commands: 'student SOURCE DEST' (the student version) and "
                    "'grade NOTEBOOK' (the checks of one notebook).")
    parser.add_argument("submissions", nargs="+", metavar="SUBMISSION", help="a notebook, or a folder of them")
    parser.add_argument("--out", required=True, help="the gradebook to write (CSV)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out")
    parser.add_argument("--jobs", type=int, default=_jobs_default(), help="submissions at a time (default: one per core, as far as free memory allows: %(default)s)")
    parser.add_argument("--cell-timeout", type=float, default=Limits.cell_timeout, help="seconds per cell (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=Limits.timeout, help="seconds per notebook (default %(default)s)")
    parser.add_argument("--memory-mib", type=int, default=Limits.memory_mib, help="memory of one run, kernel and its children (MiB, default %(default)s)")
    parser.add_argument("--reference", default=str(REFERENCE), help="the solution notebook that defines the tasks (default: the course's)")
    parser.add_argument("--sanitize", default=str(SANITIZE), help="the nbval sanitize file (default: the course's tests/sanitize.cfg)")
    args = parser.parse_args(argv)
    try:
        limits = Limits(args.cell_timeout, args.timeout, args.memory_mib)
        if min(limits.cell_timeout, limits.timeout, limits.memory_mib) <= 0:
            raise ValueError("--cell-timeout, --timeout and --memory-mib must be positive")
        out = Path(args.out)
        if out.exists() and not args.force:
            raise ValueError(f"{out} exists; pass --force to overwrite it")
        if not out.parent.is_dir():
            raise ValueError(f"no folder {out.parent} for --out")
        files = collect(args.submissions)
        if out.resolve() in {p.resolve() for p, _ in files}:
            raise ValueError(f"--out {out} is one of the submissions: choose another path")
        exercise = Exercise.load(args.reference)
        rows = grade_class(args.submissions, exercise, limits, args.jobs, args.sanitize)
        write_gradebook(rows, exercise, out, force=args.force)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(rows, exercise))
    print(f"gradebook: {out}")
    return 0


def _main_commands(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertfamily.grading", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("student", help="write the student version of a solution notebook")
    s.add_argument("source")
    s.add_argument("dest")
    s.add_argument("--force", action="store_true", help="overwrite DEST even if it differs")
    g = sub.add_parser("grade", help="execute a copy of a notebook and report its checks")
    g.add_argument("notebook")
    g.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    g.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "student":
            outcome = write_student(args.source, args.dest, force=args.force)
            print(f"{outcome}: {args.dest} (student version of {args.source})")
            return 0
        results = grade(args.notebook, timeout=args.timeout)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=1, ensure_ascii=False))
    else:
        _print_report(results)
    return 0


def main(argv=None) -> int:
    """``student`` and ``grade`` as before; anything else is a class to regrade into a gradebook."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "torch" not in sys.modules:  # `grade` runs its kernel in this environment
        os.environ.update(kernels.pinned_environ())
    if argv and argv[0] in ("student", "grade"):
        return _main_commands(argv)
    return _main_gradebook(argv)


if __name__ == "__main__":
    sys.exit(main())
