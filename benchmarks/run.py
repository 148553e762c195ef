"""The course's benchmark: how long each lesson takes, how much memory it needs, and the hot spots.

    python benchmarks/run.py [NB ...] [--skip-book] [--skip-masking] [--skip-unit] [--make-test]
                             [--cores N] [--strict] [--out lib/bertfamily/results/benchmark.json]
    python benchmarks/run.py --add-grading N [--scheduler local|ADDRESS]
    python benchmarks/run.py --page-weights _build/html

(``make bench`` runs it over every notebook of ``_toc.yml``, then re-executes the appendix page
``book/running.ipynb``, which reads the result.) What it measures, one step after the other:

* **Each notebook** in a fresh kernel, one at a time, offline (``HF_HUB_OFFLINE=1``), on at most
  ``--cores`` CPUs: the wall time from kernel start to kernel shutdown, and the peak resident memory
  of the kernel's whole process tree (see :class:`TreePeak`). The notebook is read into memory and
  executed there; the file on disk is never written. A notebook that fails is recorded as failed
  and the run goes on; the script then exits with status 1.
* **Masking**: ``bertfamily.masking.mask_tokens`` against transformers'
  ``DataCollatorForLanguageModeling`` on the same batch of real BBC word pieces with the same
  probability, timed in turn (interleaved) many times; medians, tokens per second and ratios.
* **The book**: ``jupyter-book build`` into an empty temporary folder (cold), then again with
  nothing changed (rebuild); and the weight of every page of the cold build (:func:`page_weights`:
  its HTML, the site's files it loads, its browser widgets, any address outside the site).
* **The unit tests** (``pytest tests -m "not book"``).
* **The course model in the browser** (``--skip-browser`` leaves it out): lesson 1's own-sentence box on a
  minimal page in headless Chromium, offline: the bytes of the reader's first request, the time from it to
  the first guesses, and each guess after (:func:`browser_fill_times`).
* **``make test`` itself** (``--make-test``; ``make bench`` passes it): the README's whole test
  command run as a subprocess from the repository root, on the same cores, its wall time recorded as
  ``make_test`` with ``wall_s``, its exit status and pytest's closing line. Without it the summary
  falls back to an estimate from the parts (every notebook + the unit tests + a cold build).

It writes ``--out`` (JSON) and the same name with ``.md`` (a markdown table with the budgets and
a verdict per row). Timings depend on the machine and on what else runs on it: the machine facts,
including the load average before, during and after, are part of the result.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# what the book shows lives in the package (the appendix page reads it on Colab too)
from bertfamily.measurements import RESULTS, SCHEMA, load_results, masking_table, notebook_table

ROOT = Path(__file__).resolve().parents[1]
MIB = 2 ** 20

#: The budgets of the course (CONTRIBUTING.md): each notebook under 60 s and 1.5 GiB on 2 cores,
#: Binder's 2 GiB limit for reference, ``make test`` within 8 minutes (issue 39), and our masking at
#: least as fast as the transformers collator on the same batch.
BUDGETS = {"notebook_wall_s": 60.0, "notebook_peak_mib": 1536.0, "binder_mib": 2048.0,
           "make_test_s": 480.0, "make_test_cpu_s": 720.0, "masking_ratio": 1.0, "cores": 2}


# --------------------------------------------------------------------------- memory of a process tree

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

    def __enter__(self) -> "TreePeak":
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


# --------------------------------------------------------------------------- notebooks

def toc_notebooks() -> list[Path]:
    """Every notebook of ``_toc.yml``, in reading order (the list ``tools/nb.py list`` prints)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import nb as nbtools
    finally:
        sys.path.pop(0)
    return nbtools.toc_notebooks()


def _name(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def code_cells(nb) -> int:
    """How many cells nbclient will run (code cells that are not empty)."""
    return sum(1 for c in nb.cells if c.cell_type == "code" and c.source.strip())


def run_notebook(path, timeout: int = 300, interval: float = 0.05, progress=None) -> dict:
    """Execute the notebook at ``path`` in a fresh kernel, in memory; measure time and peak memory.

    Returns ``{"notebook", "status" ("ok" or "failed"), "error", "wall_s", "peak_rss_mib",
    "sampled_tree_mib", "largest_process_mib", "samples", "cells", "loadavg_start", "stalled"}``. The
    file is read once and never written. ``progress`` (a tqdm bar) advances by one per executed cell.

    A cell that runs over ``timeout`` has stalled (every lesson takes about a minute): nbclient has
    been seen to wait on after a cell of ``ipywidgets.interact``, the kernel idle (issue 39). The
    notebook then runs once more in a fresh kernel, and ``stalled`` says so; a second stall fails.
    """
    row, timed_out = _run_notebook_once(path, timeout, interval, progress)
    stalled = None
    if timed_out:
        stalled = f"a cell ran over {timeout} s ({row['error']}); the notebook ran again"
        row, _ = _run_notebook_once(path, timeout, interval, None)
    return {**row, "stalled": stalled}


def _run_notebook_once(path, timeout: int, interval: float, progress) -> tuple[dict, bool]:
    """One run of :func:`run_notebook`: its row, and whether a cell ran over ``timeout``."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    path = Path(path)
    if path.suffix != ".ipynb" or not path.is_file():
        raise ValueError(f"not a notebook file (.ipynb): {path}")
    nb = nbformat.read(path, as_version=4)
    cells = code_cells(nb)
    done = [0]

    def advance(**_):
        done[0] += 1
        if progress is not None:
            progress.update(1)

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}, on_cell_executed=advance)
    row = {"notebook": _name(path), "status": "ok", "error": None, "cells": cells,
           "loadavg_start": round(os.getloadavg()[0], 2)}
    timed_out = False
    start = time.perf_counter()
    # rooted at the kernel, once it has started: the caller's other children (a test runner's
    # browser, a second notebook) are not the notebook's memory; the kernel's workers are
    def kernel_pid():
        return client.km.provisioner.pid if client.km and client.km.provisioner else None

    with TreePeak(root=kernel_pid, include_root=True, interval=interval) as peak:
        try:
            client.execute()
        except Exception as err:  # a failing cell, a timeout, a dead kernel: record it and go on
            row["status"] = "failed"
            timed_out = isinstance(err, CellTimeoutError)
            lines = [l for l in str(err).strip().splitlines() if l.strip()]
            line = (lines[0] if timed_out else lines[-1]) if lines else ""  # a timeout's first line says it
            row["error"] = f"{type(err).__name__}: {line}"[:300]
    row["wall_s"] = round(time.perf_counter() - start, 2)
    row.update(peak_rss_mib=round(peak.peak_mib, 1), sampled_tree_mib=round(peak.sampled_mib, 1),
               largest_process_mib=round(peak.largest_process_mib, 1), samples=peak.samples)
    if progress is not None and done[0] < cells:  # cells a failure skipped
        progress.update(cells - done[0])
    return row, timed_out


# --------------------------------------------------------------------------- masking throughput

def masking_batch(rows: int = 200, length: int = 128):
    """The batch lesson 01 uses: ``rows`` blocks of ``length`` word pieces of BBC articles."""
    from bertfamily.data import bbc_news
    from bertfamily.models import minilm_tokenizer
    from bertfamily.pretraining import token_blocks

    tokenizer = minilm_tokenizer()
    texts, _ = bbc_news()
    return tokenizer, token_blocks(tokenizer, texts[:rows], length=length)[:rows]


def masking_comparison(tokenizer, batch, probability: float = 0.15, repeats: int = 100, seed: int = 0) -> dict:
    """Masking throughput of ``bertfamily.masking.mask_tokens`` and of transformers' collator.

    The same ``batch`` (2-D tensor of ids) and ``probability`` for all three contestants:

    * ``bertfamily.mask_tokens``: finds the special tokens itself;
    * ``collator.torch_mask_tokens``: the collator's masking step, handed a ready special-tokens mask;
    * ``collator(examples)``: calling the collator on a list of ``{"input_ids": row}`` examples, as a
      ``DataLoader`` does (it also pads, converts and looks up the special tokens row by row).

    After one warm-up call each, every repeat times each contestant once, in an order that rotates
    from repeat to repeat, so a slow moment of the machine touches all of them. Returns the median
    seconds, tokens per second (``batch.numel() / median``) and ``ratio``: our tokens per second over
    each collator variant's (above 1: ours is faster).
    """
    import torch
    from transformers import DataCollatorForLanguageModeling

    from bertfamily.masking import mask_tokens
    from bertfamily.timing import run_times

    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    batch = torch.as_tensor(batch)
    if batch.dim() != 2 or batch.numel() == 0:
        raise ValueError(f"batch must be a non-empty 2-D tensor of token ids, got shape {tuple(batch.shape)}")
    generator = torch.Generator().manual_seed(seed)
    vocab = dict(vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id,
                 special_ids=tokenizer.all_special_ids, pad_token_id=tokenizer.pad_token_id)
    protected = torch.isin(batch, torch.tensor(tokenizer.all_special_ids))
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability, seed=seed)
    examples = [{"input_ids": row} for row in batch.tolist()]
    contestants = {
        "bertfamily.mask_tokens": lambda: mask_tokens(batch, generator=generator, probability=probability, **vocab),
        "collator.torch_mask_tokens": lambda: collator.torch_mask_tokens(batch.clone(), special_tokens_mask=protected),
        "collator(examples)": lambda: collator(examples),
    }
    names = list(contestants)
    times = run_times(contestants, warmup=1, runs=repeats, rotate=True)  # the order rotates, run by run
    tokens = batch.numel()
    median = {name: statistics.median(ts) for name, ts in times.items()}
    throughput = {name: tokens / s for name, s in median.items()}
    ours = names[0]
    return {"batch": list(batch.shape), "tokens": tokens, "probability": probability, "repeats": repeats,
            "torch_threads": torch.get_num_threads(), "median_s": median,
            "spread_s": {name: [min(ts), max(ts)] for name, ts in times.items()},
            "tokens_per_s": throughput, "ours": ours,
            "ratio": {name: throughput[ours] / throughput[name] for name in names[1:]}}


# --------------------------------------------------------------------------- book, tests, machine

def _timed(cmd, cwd=ROOT, timeout: int = 1800) -> dict:
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        rc, tail = done.returncode, (done.stdout + done.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        rc, tail = None, f"timed out after {timeout} s"
    wall = round(time.perf_counter() - start, 2)
    return {"wall_s": wall, "returncode": rc, "status": "ok" if rc == 0 else "failed",
            "output_tail": None if rc == 0 else tail}


def book_build_times(root: Path = ROOT) -> dict:
    """``jupyter-book build`` into an empty temporary folder (cold), then again unchanged (rebuild).

    The cold build also counts the HTML pages it wrote under ``book/``, a check that it built the book.
    """
    jb = Path(sys.executable).with_name("jupyter-book")
    with tempfile.TemporaryDirectory(prefix="bench-book-") as out:
        cmd = [str(jb), "build", str(root), "--path-output", out, "--keep-going"]
        cold = _timed(cmd)
        cold["pages"] = len(list((Path(out) / "_build" / "html" / "book").glob("*.html")))
        if cold["returncode"] == 0:
            cold["weights"] = page_weights(Path(out) / "_build" / "html")
        rebuild = _timed(cmd)
    return {"command": "jupyter-book build . --path-output <empty temporary folder> --keep-going",
            "cold": cold, "rebuild": rebuild}


class _PageParser(HTMLParser):
    """What a page makes the browser load as it opens (scripts, stylesheets, preloads, images,
    icons), its inline scripts and styles, and the bytes of the course's browser widgets."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.loads, self.inline, self.widget_depth, self.widget_start = [], 0, 0, []
        self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        rel = (a.get("rel") or "").split()
        if tag == "script" and a.get("src"):
            self.loads.append(a["src"])
        elif tag == "link" and a.get("href") and {"stylesheet", "preload", "icon"} & set(rel):
            self.loads.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.loads.append(a["src"])
        elif tag in ("script", "style"):
            self._in = tag
        if tag == "div" and "bf-widget" in (a.get("class") or "").split():
            self.widget_start.append(self.getpos())

    def handle_data(self, data):
        if self._in:
            self.inline += len(data.encode("utf-8"))

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None


def page_weights(html: Path, pages=None) -> dict:
    """The weight of each page of a built site: the bytes of its HTML and of every file of the site it
    makes the browser load as it opens (scripts, stylesheets, preloads, images and icons, each once),
    whether the file exists, and every address outside the site it names (which an offline reader
    cannot load). ``inline_bytes``: its inline scripts and styles; ``widgets``/``widget_bytes``: the
    course's browser widgets (``bertfamily.widgets``) on it, whole. Not counted: fonts and images that
    stylesheets name, and what scripts fetch later (the search index, a model on first use).

    ``pages`` defaults to every ``.html`` file under ``book/`` and the site's ``index.html``.
    """
    html = Path(html)
    if not (html / "index.html").is_file():
        raise ValueError(f"{html} is not a built site (no index.html): build it with `make book`")
    pages = [Path(p) for p in pages] if pages else [html / "index.html", *sorted((html / "book").glob("*.html"))]
    out = {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        parser = _PageParser()
        parser.feed(text)
        files, external, missing = {}, [], []
        for ref in parser.loads:
            url = urlsplit(ref)
            if url.scheme in ("http", "https") or ref.startswith("//"):
                external.append(ref)
                continue
            if url.scheme == "data":
                continue
            target = (page.parent / unquote(url.path)).resolve()
            if target.is_file():
                files[str(target)] = target.stat().st_size
            else:
                missing.append(ref)
        widgets = [m.start() for m in re.finditer(r'<div class="bf-widget', text)]
        widget_bytes = sum(len(_element(text, start).encode("utf-8")) for start in widgets)
        html_bytes = len(text.encode("utf-8"))
        out[str(page.relative_to(html))] = {
            "html_bytes": html_bytes, "loaded_bytes": sum(files.values()), "loaded_files": len(files),
            "total_bytes": html_bytes + sum(files.values()), "inline_bytes": parser.inline,
            "widgets": len(widgets), "widget_bytes": widget_bytes, "external": sorted(set(external)),
            "missing": sorted(set(missing))}
    return out


def _element(text: str, start: int) -> str:
    """The ``<div ...>...</div>`` that starts at ``start`` of ``text`` (nested divs counted)."""
    depth, pos = 0, start
    for m in re.compile(r"<div\b|</div>").finditer(text, start):
        depth += 1 if m.group() != "</div>" else -1
        pos = m.end()
        if depth == 0:
            break
    return text[start:pos]


def page_weight_table(weights: dict) -> str:
    """The pages' weights as a markdown table (kB = 1,000 bytes)."""
    rows = ["| page | HTML (kB) | files it loads | their kB | total (kB) | widgets (kB) | outside the site |",
            "|---|--:|--:|--:|--:|--:|---|"]
    for page, w in weights.items():
        widgets = f"{w['widgets']}: {w['widget_bytes'] / 1000:.1f}" if w["widgets"] else ""
        rows.append(f"| {page} | {w['html_bytes'] / 1000:.1f} | {w['loaded_files']} | {w['loaded_bytes'] / 1000:.1f} "
                    f"| {w['total_bytes'] / 1000:.1f} | {widgets} | {len(w['external']) or ''} |")
    return "\n".join(rows)


def unit_test_time() -> dict:
    """Wall time of the unit tests (what ``make unit`` runs)."""
    result = _timed([sys.executable, "-m", "pytest", "tests", "-q", "-m", "not book", "-p", "no:cacheprovider"])
    result["command"] = 'pytest tests -m "not book"'
    return result


#: The README's test command, measured whole by ``--make-test``.
MAKE_TEST = ("make", "test")
#: pytest's closing line: ``==== 803 passed, 3 skipped in 460.21s (0:07:40) ====``.
_PYTEST_CLOSING = re.compile(r"^=+ (?P<counts>.*?) in (?P<seconds>[0-9.]+)s(?: \([0-9:]+\))? =+$")


def pytest_closing(output: str) -> str | None:
    """The counts of pytest's last closing line in ``output`` (``"803 passed, 3 skipped"``), or None."""
    found = [m["counts"] for m in map(_PYTEST_CLOSING.match, output.splitlines()) if m]
    return found[-1] if found else None


def children_cpu_s() -> float:
    """User + system CPU seconds of every finished process this one has waited for, and of theirs
    (``RUSAGE_CHILDREN``): the difference around a command is the CPU time of its whole process tree,
    a measure that does not move with the machine's load as wall time does. (A process its parent
    never waited for is not counted; the suite's kernels, sandboxes and workers are waited for.)"""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def make_test_time(cmd=MAKE_TEST, cwd: Path = ROOT, timeout: int = 3600) -> dict:
    """Wall time of the whole ``make test`` (lint, checks, every test and notebook, the strict build),
    run as a subprocess from ``cwd``: recorded as ``make_test`` with its ``wall_s``, exit status,
    pytest's closing line and the load average before and after (the machine is part of the number).
    ``cmd`` is there for the tests, which time a stand-in instead. ``units``: the seconds each unit of
    work took (a test file, a notebook, a group of files sharing one result), as conftest.py writes
    them; the next `make test` hands out the longest first."""
    start = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    before = [round(x, 2) for x in os.getloadavg()]
    units_file = Path(tempfile.mkdtemp(prefix="bertfamily-units-")) / "units.json"
    env = {**os.environ, "BERTFAMILY_UNIT_TIMES": str(units_file)}  # conftest.py writes each unit's seconds
    cpu0 = children_cpu_s()
    t0 = time.perf_counter()
    try:
        done = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
        rc, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        rc = None
        output = (expired.stdout or b"").decode(errors="replace") if isinstance(expired.stdout, bytes) \
            else (expired.stdout or "")
        output += f"\ntimed out after {timeout} s"
    wall = round(time.perf_counter() - t0, 2)
    cpu = round(children_cpu_s() - cpu0, 1)
    try:
        units = json.loads(units_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        units = None  # a stand-in command, or a run that ended before pytest did
    finally:
        units_file.unlink(missing_ok=True)
        units_file.parent.rmdir()
    return {"command": " ".join(cmd), "date": start, "wall_s": wall, "cpu_s": cpu, "returncode": rc,
            "status": "ok" if rc == 0 else "failed", "pytest": pytest_closing(output),
            "loadavg_before": before, "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "output_tail": None if rc == 0 else output[-1500:], "units": units}


def _honest_class(folder: Path, submissions: int) -> None:
    """``submissions`` honest submissions in ``folder``: the course's own answers, run (the student
    version with the solutions and their outputs put back)."""
    import nbformat

    from bertfamily import grading
    if submissions < 1:
        raise ValueError(f"--add-grading needs at least 1 submission, got {submissions}")
    folder.mkdir()
    answer = grading.model_answer(nbformat.read(grading.REFERENCE, as_version=4))
    for n in range(submissions):
        nbformat.write(answer, folder / f"student{n:02d}_exercise.ipynb")


def _grade_timed(folder: Path, out: Path, submissions: int, jobs: int, scheduler: str | None = None) -> dict:
    """``bertfamily-grade`` on ``folder`` into ``out``, timed; with ``scheduler``, through that Dask cluster."""
    import csv
    where = ["--scheduler", scheduler] if scheduler else []
    result = _timed([str(Path(sys.executable).with_name("bertfamily-grade")), str(folder), "--out", str(out),
                     "--jobs", str(jobs), *where], timeout=7200)
    rows = list(csv.DictReader(out.open(newline="", encoding="utf-8"))) if out.is_file() else []
    full = [r for r in rows if r["score"] == r["max_score"]]
    command = f"bertfamily-grade <{submissions} honest submissions> --jobs {jobs} {' '.join(where)}"
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    result.update(command=command.strip(), date=now,
                  submissions=submissions, jobs=jobs, full_marks=len(full),
                  per_submission_s=round(result["wall_s"] / submissions, 1))
    return result


def grading_time(submissions: int = 30, jobs: int = 2) -> dict:
    """Wall time of ``bertfamily-grade`` on a class of honest submissions, ``jobs`` at a time."""
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        _honest_class(Path(tmp) / "class", submissions)
        return _grade_timed(Path(tmp) / "class", Path(tmp) / "gradebook.csv", submissions, jobs)


def cluster_grading_time(submissions: int = 60, jobs: int = 2, scheduler: str = "local") -> dict:
    """The same class graded with ``--jobs`` here, then through the Dask cluster at ``scheduler``
    (``local``: one started on this machine with ``jobs`` worker processes): the cluster's wall time
    over the local one, the overhead per submission, and whether the two gradebooks are the same bytes."""
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        folder, books = Path(tmp) / "class", (Path(tmp) / "local.csv", Path(tmp) / "cluster.csv")
        _honest_class(folder, submissions)
        local = _grade_timed(folder, books[0], submissions, jobs)
        cluster = _grade_timed(folder, books[1], submissions, jobs, scheduler)
        same = all(b.is_file() for b in books) and books[0].read_bytes() == books[1].read_bytes()
    return {"submissions": submissions, "jobs": jobs, "scheduler": scheduler, "local": local, "cluster": cluster,
            "ratio": round(cluster["wall_s"] / local["wall_s"], 3),
            "overhead_per_submission_s": round((cluster["wall_s"] - local["wall_s"]) / submissions, 2),
            "same_gradebook": same, "status": "ok" if local["status"] == cluster["status"] == "ok" and same
            else "failed"}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """The facts a reader needs to judge the timings: CPU, cores, memory, versions, date, load."""
    import importlib.metadata

    import psutil
    import torch
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "cores_used": affinity,
            "torch_threads": torch.get_num_threads(), "memory_gib": round(psutil.virtual_memory().total / 2 ** 30, 1),
            "platform": platform.platform(terse=True), "python": platform.python_version(),
            "torch": torch.__version__, "transformers": importlib.metadata.version("transformers"),
            "offline": os.environ.get("HF_HUB_OFFLINE") == "1",
            "loadavg_before": [round(x, 2) for x in os.getloadavg()]}


def limit_cores(n: int | None) -> None:
    """Run this process and every kernel it starts on at most ``n`` of the CPUs it may use."""
    if n is None or not hasattr(os, "sched_setaffinity"):
        return
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"cores must be a positive integer, got {n!r}")
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:n])


# --------------------------------------------------------------------------- verdicts and summary

def within(value, budget) -> bool:
    """The budgets say "under": a value equal to its budget is over."""
    return value is not None and value < budget


def notebook_verdict(row: dict, budgets: dict = BUDGETS) -> str:
    """``"within"``, ``"failed"``, or ``"over: time"`` / ``"over: memory"`` / ``"over: time, memory"``."""
    if row.get("status") != "ok":
        return "failed"
    over = [what for what, key, budget in (("time", "wall_s", "notebook_wall_s"),
                                           ("memory", "peak_rss_mib", "notebook_peak_mib"))
            if not within(row[key], budgets[budget])]
    return "within" if not over else "over: " + ", ".join(over)


def summarize(result: dict) -> dict:
    """Verdicts of every part of ``result`` against ``result["budgets"]``; added as ``result["summary"]``."""
    budgets = result["budgets"]
    rows = result["notebooks"]
    for row in rows:
        row["verdict"] = notebook_verdict(row, budgets)
    ok = [r for r in rows if r["status"] == "ok"]
    summary = {"notebooks": len(rows), "within": sum(r["verdict"] == "within" for r in rows),
               "over": [r["notebook"] for r in rows if r["verdict"].startswith("over")],
               "failed": [r["notebook"] for r in rows if r["verdict"] == "failed"],
               "total_wall_s": round(sum(r["wall_s"] for r in rows), 1),
               "max_wall_s": max((r["wall_s"] for r in ok), default=None),
               "max_peak_rss_mib": max((r["peak_rss_mib"] for r in ok), default=None)}
    masking = result.get("masking")
    if masking:
        core = masking["ratio"]["collator.torch_mask_tokens"]
        masking["verdict"] = "within" if core >= budgets["masking_ratio"] else "over"
        summary["masking_within"] = masking["verdict"] == "within"
    if result.get("make_test"):  # measured: the whole command's wall time, no estimate
        mt = result["make_test"]
        mt["verdict"] = "within" if within(mt["wall_s"], budgets["make_test_s"]) and mt["status"] == "ok" \
            else "failed" if mt["status"] != "ok" else "over"
        summary["make_test_s"] = mt["wall_s"]
        if mt.get("cpu_s") is not None:
            summary["make_test_cpu_min"] = round(mt["cpu_s"] / 60, 1)
            summary["make_test_cpu_within"] = within(mt["cpu_s"], budgets["make_test_cpu_s"])
        summary["make_test_within"] = mt["verdict"] == "within"
    elif result.get("unit_tests") and result.get("book"):
        # not measured: estimated as unit tests + every notebook under nbval + a strict cold build
        parts = [summary["total_wall_s"], result["unit_tests"]["wall_s"], result["book"]["cold"]["wall_s"]]
        summary["make_test_estimate_s"] = round(sum(parts), 1)
        summary["make_test_estimate_within"] = within(summary["make_test_estimate_s"], budgets["make_test_s"])
    summary["all_within"] = (not summary["over"] and not summary["failed"]
                             and summary.get("masking_within", True)
                             # a measured `make test` (run on pytest-xdist workers) decides; the
                             # estimate (every part one after the other) only when none was measured
                             and (result["make_test"]["verdict"] == "within" if result.get("make_test")
                                  else summary.get("make_test_estimate_within", True)))
    result["summary"] = summary
    return summary


# --------------------------------------------------------------------------- the course model in the browser

#: What the browser measurement types in turn: lesson 1's two sentences, then news of each kind.
FILL_SENTENCES = ("the chancellor said the [MASK] would grow by 3% next year.",
                  "manchester united [MASK] the match 2-1.",
                  "the film won the [MASK] for best actor at the oscars.",
                  "shares in the [MASK] fell sharply after the profit warning.",
                  "the prime minister will [MASK] the election in [MASK].",
                  "apple unveiled a new [MASK] that plays music and video.")
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

#: Every resource the page loaded, with its size on the wire and its body (same origin: both known).
_RESOURCES = "() => performance.getEntriesByType('resource').map(e => [e.name, e.transferSize, e.decodedBodySize])"


def fill_page(folder: Path, model_folder: Path, done: dict) -> Path:
    """A minimal site in ``folder``: one page with lesson 1's cell (tagged ``browser-fill``), the page's
    script and style, and the model exported in ``model_folder`` (``done``: :func:`webmodel.site_export`'s
    result). Returns the page."""
    from bertfamily import webmodel
    webmodel.write_static(folder / "_static", model_folder)
    page = folder / "index.html"
    page.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>fill</title>'
        f'<script>window.BERTFAMILY_MODEL = {json.dumps(webmodel.page_settings(done))};</script>'
        '<script src="_static/fillmask.js"></script><link rel="stylesheet" href="_static/fillmask.css">'
        f'</head><body><main><div class="cell tag_{webmodel.TAG}"><div class="cell_output">'
        "a widget that needs a kernel</div></div></main></body></html>", encoding="utf-8")
    return page


def measure_fill(page, sentences=FILL_SENTENCES, timeout_ms: int = 120000) -> dict:
    """On an open page with the form, type each sentence and press Enter, as a reader does; wait for the
    guesses. Times come from the page (``performance.now``): the first from the reader's first request
    (Enter) to the first guesses shown, model download included; then each guess after it. Bytes: what
    the page loaded before the first request, and what that request downloaded."""
    page.wait_for_selector("form.bf-fill input", timeout=timeout_ms)
    before = page.evaluate(_RESOURCES)
    shown = []
    for n, text in enumerate(sentences, 1):
        page.fill("form.bf-fill input", text)
        page.press("form.bf-fill input", "Enter")
        page.wait_for_function("n => window.bertfamilyFill.timings.guesses.length >= n", arg=n, timeout=timeout_ms)
        shown.append(page.eval_on_selector_all(".bf-fill-guesses",
                                               "els => els.map(e => JSON.parse(e.dataset.guesses))"))
    timings = page.evaluate("() => window.bertfamilyFill.timings")
    after = page.evaluate(_RESOURCES)
    seen = {name for name, *_ in before}
    downloaded = [(name, size, body) for name, size, body in after if name not in seen]
    times = [(g["shown"] - g["started"]) / 1000 for g in timings["guesses"]]
    return {"sentences": len(sentences), "errors": [g["error"] for g in timings["guesses"] if g["error"]],
            "page_bytes": sum(body for _, _, body in before), "download_bytes": sum(body for *_, body in downloaded),
            "downloaded": [name.rsplit("/", 1)[-1] for name, *_ in downloaded],
            "load_s": round((timings["loaded"] - timings["requested"]) / 1000, 3),
            "first_guess_s": round(times[0], 3), "guess_s": [round(t, 3) for t in times[1:]],
            "median_guess_s": round(statistics.median(times[1:]), 3) if len(times) > 1 else None,
            "guesses": shown}


def browser_fill_times(model_folder: Path | None = None, sentences=FILL_SENTENCES, chromium: Path = CHROMIUM,
                       driver=None) -> dict:
    """The course model in headless Chromium, offline: a minimal page with lesson 1's form (:func:`fill_page`)
    served on localhost, :func:`measure_fill` on it. ``model_folder``: an export (default: the course model,
    exported into a temporary folder). Requests leaving the site are blocked and listed (``left_site``).
    ``driver``: a running Playwright (one process holds one; default: one started here)."""
    import functools
    import http.server

    from playwright.sync_api import sync_playwright

    from bertfamily import webmodel
    if not Path(chromium).is_file():
        raise FileNotFoundError(f"no Chromium at {chromium} (apt-get install chromium, or set CHROMIUM)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if model_folder is None:
            model_folder = tmp / "export"
            done = webmodel.site_export(model_folder)
        else:
            done = {"bytes": webmodel.download_bytes(model_folder),
                    "parameters": sum(t["count"] for t in webmodel.read(model_folder)[0]["tensors"])}
        fill_page(tmp / "site", Path(model_folder), done)
        handler = functools.partial(_quiet_handler(), directory=str(tmp / "site"))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base, left = f"http://127.0.0.1:{server.server_address[1]}/", []
        try:
            with (contextlib.nullcontext(driver) if driver is not None else sync_playwright()) as playwright:
                browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
                context = browser.new_context()
                context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                              else (left.append(route.request.url), route.abort()))
                page = context.new_page()
                page.goto(base + "index.html", wait_until="load")
                result = measure_fill(page, sentences)
                result["browser"] = browser.version
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    return {**result, "left_site": left, "model_bytes": done["bytes"], "status": "ok" if not result["errors"]
            and not left else "failed"}


def outside_event_loop(function, *args, **kwargs):
    """``function(*args, **kwargs)``, in a thread of its own where this one runs an asyncio loop: Playwright's
    sync API refuses to start inside one (a Playwright already started in this process, say by a test, runs
    one in its thread)."""
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args, **kwargs).result()


def browser_fill_record(result: dict | None = None) -> dict:
    """:func:`browser_fill_times` of the course model (or ``result``, one of its results) as the benchmark's
    result records it: the guesses counted, not kept."""
    result = outside_event_loop(browser_fill_times) if result is None else result
    return {**{k: v for k, v in result.items() if k != "guesses"},
            "guesses": sum(len(g) for g in result["guesses"])}


def _quiet_handler():
    import http.server

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    return Quiet


# --------------------------------------------------------------------------- writing the result

def markdown(result: dict) -> str:
    """The whole result as a markdown page (``results.md``)."""
    m, s, b = result["machine"], result["summary"], result["budgets"]
    after = m.get("loadavg_after")
    out = ["# Benchmark: time and memory of every lesson", "",
           f"Measured {m['date']} on {m['cpu_model']}, {m['cores_used']} of {m['cpu_count']} cores used, "
           f"{m['torch_threads']} torch threads, {m['memory_gib']} GiB; Python {m['python']}, torch {m['torch']}, "
           f"transformers {m['transformers']}{', offline' if m['offline'] else ''}. Load average (1, 5, 15 min) "
           f"{m['loadavg_before']} before, {after} after: on a machine shared with other work the times are "
           "inflated. Regenerate with `make bench`.", "",
           f"Each notebook runs in a fresh kernel; wall time from kernel start to shutdown; peak memory is the "
           f"largest resident memory of the kernel's whole process tree (RSS; with worker processes, the "
           f"sum of their proportional set sizes, each shared page once), sampled every "
           f"{result['sample_interval_s']} s, or the kernel's own recorded peak if larger. Budgets: under "
           f"{b['notebook_wall_s']:.0f} s and {b['notebook_peak_mib']:,.0f} MiB (1.5 GiB) per notebook on "
           f"{b['cores']} cores; Binder allows {b['binder_mib']:,.0f} MiB.", "",
           notebook_table(result), ""]
    for r in result["notebooks"]:
        if r["error"]:
            out.append(f"- {Path(r['notebook']).stem} failed: `{r['error']}`")
    if s["over"] or s["failed"]:
        out += [f"Over budget: {', '.join(s['over']) or 'none'}. Failed: {', '.join(s['failed']) or 'none'}.", ""]
    masking = result.get("masking")
    if masking:
        core = masking["ratio"]["collator.torch_mask_tokens"]
        out += ["## Masking throughput", "",
                f"The same batch ({masking['batch'][0]} × {masking['batch'][1]} word pieces of BBC articles), "
                f"probability {masking['probability']}, {masking['repeats']} interleaved timings each, medians, "
                f"{masking['torch_threads']} torch threads.", "", masking_table(masking), "",
                f"Budget: `bertfamily.masking` at least {b['masking_ratio']:.1f}× the collator's masking step: "
                f"{core:.2f}×, {masking['verdict']}.", ""]
    book = result.get("book")
    if book:
        out += ["## Building the book", "", "| build | wall time (s) | status |", "|---|--:|---|",
                f"| cold (empty output folder, {book['cold'].get('pages', '?')} pages) | {book['cold']['wall_s']:.1f} "
                f"| {book['cold']['status']} |",
                f"| rebuild (nothing changed) | {book['rebuild']['wall_s']:.1f} | {book['rebuild']['status']} |", ""]
        if book["cold"].get("weights"):
            out += ["### The pages' weight", "",
                    "Bytes of each page's HTML and of the site's files it loads as it opens (scripts, stylesheets, "
                    "images; fonts named by stylesheets and what scripts fetch later are not counted); the "
                    "browser widgets' share of the HTML; addresses outside the site it names.", "",
                    page_weight_table(book["cold"]["weights"]), ""]
    fill = result.get("browser_fill")
    if fill:
        out += ["## The course model in the browser", "",
                f"Lesson 1's own-sentence box in headless Chromium {fill['browser']}, offline, on a minimal page "
                f"with its script ({fill['page_bytes']:,} bytes with the page's style): the reader's first request "
                f"downloads {fill['download_bytes']:,} bytes ({', '.join(fill['downloaded'])}) and shows the first "
                f"five guesses after {fill['first_guess_s']:.2f} s (download and parsing {fill['load_s']:.2f} s); "
                f"each guess after it takes {fill['median_guess_s']:.2f} s (median of {len(fill['guess_s'])}, "
                f"at most {max(fill['guess_s']):.2f} s); {fill['status']}.", ""]
    unit = result.get("unit_tests")
    if unit:
        out += [f"Unit tests (`{unit['command']}`): {unit['wall_s']:.1f} s, {unit['status']}.", ""]
    if "make_test_estimate_s" in s:
        out += [f"`make test`, estimated as unit tests + every notebook + a cold build: "
                f"{s['make_test_estimate_s']:.0f} s (budget {b['make_test_s']:.0f} s): "
                f"{'within' if s['make_test_estimate_within'] else 'over'}.", ""]
    if result.get("make_test"):
        mt = result["make_test"]
        out += [f"`{mt['command']}`, measured (the whole command, {m['cores_used']} cores): {mt['wall_s']:.0f} s "
                f"(budget {b['make_test_s']:.0f} s), {mt['status']}"
                + (f" ({mt['pytest']})" if mt.get("pytest") else "") + f": {mt['verdict']}."
                + (f" CPU time of its whole process tree (user + system): {mt['cpu_s'] / 60:.1f} minutes "
                   f"(budget {b['make_test_cpu_s'] / 60:.0f}), a figure the machine's load moves less than wall time."
                   if mt.get("cpu_s") is not None else "")
                + (f" Load average {mt['loadavg_before']} before, {mt['loadavg_after']} after."
                   if mt.get("loadavg_before") else ""), ""]
    if result.get("grading"):
        g = result["grading"]
        out += [f"Regrading a class (`{g['command']}`{_measured(g)}): {g['wall_s']:.0f} s, {g['per_submission_s']} s "
                f"a submission, {g['full_marks']} of {g['submissions']} with full marks, {g['status']}.", ""]
    if result.get("grading_cluster"):
        g = result["grading_cluster"]
        out += [f"Regrading a class through a Dask cluster (`--scheduler {g['scheduler']}`{_measured(g['local'])}) "
                f"against `--jobs "
                f"{g['jobs']}` on the same machine, {g['submissions']} submissions: {g['cluster']['wall_s']:.0f} s "
                f"against {g['local']['wall_s']:.0f} s, a ratio of {g['ratio']:.2f} "
                f"({g['overhead_per_submission_s']:+.2f} s a submission); the same gradebook: "
                f"{'yes' if g['same_gradebook'] else 'no'}; {g['status']}.", ""]
    return "\n".join(out)


def _measured(timed: dict) -> str:
    """", measured DATE" for a grading run that records its date (``--add-grading`` runs apart from the rest)."""
    return f", measured {timed['date']}" if timed.get("date") else ""


#: Parts measured on their own (``--add-grading``), which a whole run keeps from the previous result.
SEPARATE = ("grading", "grading_cluster")


def write_results(result: dict, out: Path) -> tuple[Path, Path]:
    """Write ``result`` as JSON to ``out`` and as markdown next to it (same name, ``.md``)."""
    out = Path(out)
    if out.suffix != ".json":
        raise ValueError(f"--out must name a .json file, got {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md = out.with_suffix(".md")
    md.write_text(markdown(result) + "\n", encoding="utf-8")
    return out, md


# --------------------------------------------------------------------------- the command

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: every notebook of _toc.yml)")
    parser.add_argument("--out", default=str(RESULTS),
                        help="the JSON result; the markdown table goes next to it (default: the committed result, "
                             "lib/bertfamily/results/benchmark.json, package data that the appendix page reads)")
    parser.add_argument("--skip-book", action="store_true", help="do not time the book's builds")
    parser.add_argument("--skip-masking", action="store_true", help="do not compare the masking functions")
    parser.add_argument("--skip-unit", action="store_true", help="do not time the unit tests")
    parser.add_argument("--skip-browser", action="store_true",
                        help="do not time the course model in Chromium (lesson 1's own-sentence box)")
    parser.add_argument("--make-test", action="store_true",
                        help="also time the whole `make test` as a subprocess, recorded as make_test (make bench "
                             "passes it; about 8 minutes)")
    parser.add_argument("--cores", type=int, default=BUDGETS["cores"],
                        help=f"run on at most this many CPUs (default {BUDGETS['cores']}, the budget's machine; "
                             "0: all)")
    parser.add_argument("--interval", type=float, default=0.05, help="memory sampling interval in seconds")
    parser.add_argument("--strict", action="store_true", help="exit with status 2 when anything is over budget")
    parser.add_argument("--add-grading", type=int, metavar="N",
                        help="only time the grader on a class of N honest submissions (2 jobs) and add that to "
                             "the existing --out (about 25 s a submission on 2 cores)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="with --add-grading: grade the class with --jobs 2 here and through this Dask "
                             "cluster ('local': one started here with 2 workers) and record the overhead")
    parser.add_argument("--page-weights", metavar="HTML",
                        help="only measure the pages' weight of a built site (e.g. _build/html, after make book) "
                             "and print it; nothing is run or written")
    args = parser.parse_args(argv)
    if args.page_weights:
        try:
            weights = page_weights(Path(args.page_weights))
        except ValueError as err:
            parser.error(str(err))
        print(page_weight_table(weights))
        return 0
    if args.scheduler and args.add_grading is None:
        parser.error("--scheduler goes with --add-grading N")
    if args.scheduler:
        result = load_results(args.out)
        g = result["grading_cluster"] = cluster_grading_time(args.add_grading, 2, args.scheduler)
        write_results(result, Path(args.out))
        print(f"grading {g['submissions']} submissions: --jobs 2 {g['local']['wall_s']:.0f} s, --scheduler "
              f"{g['scheduler']} {g['cluster']['wall_s']:.0f} s: ratio {g['ratio']:.2f}, "
              f"{g['overhead_per_submission_s']:+.2f} s a submission, same gradebook: {g['same_gradebook']}")
        return 0 if g["status"] == "ok" else 1
    if args.add_grading is not None:
        result = load_results(args.out)
        result["grading"] = grading_time(args.add_grading)
        write_results(result, Path(args.out))
        print(f"grading: {result['grading']['submissions']} submissions, {result['grading']['jobs']} jobs, "
              f"{result['grading']['wall_s']:.0f} s, {result['grading']['full_marks']} with full marks")
        return 0 if result["grading"]["status"] == "ok" else 1
    if args.cores < 0:
        parser.error(f"--cores must be 0 (all) or a positive number, got {args.cores}")
    if args.interval <= 0:
        parser.error(f"--interval must be a positive number of seconds, got {args.interval}")
    if not args.out.endswith(".json"):
        parser.error(f"--out must name a .json file, got {args.out}")
    paths = [Path(p).resolve() for p in args.notebooks] or toc_notebooks()
    bad = [str(p) for p in paths if p.suffix != ".ipynb" or not p.is_file()]
    if bad:
        parser.error(f"not notebook files (.ipynb): {', '.join(bad)}")

    import nbformat
    from tqdm.auto import tqdm

    limit_cores(args.cores or None)
    from bertfamily import kernels
    os.environ.update(kernels.pinned_environ())  # as make test and the committed outputs (before torch)
    os.environ["HF_HUB_OFFLINE"] = "1"  # the budgets are for an offline run; kernels inherit this
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = {"schema": SCHEMA, "budgets": dict(BUDGETS), "machine": machine(), "sample_interval_s": args.interval,
              "notebooks": [], "masking": None, "book": None, "unit_tests": None, "browser_fill": None,
              "make_test": None}
    total = sum(code_cells(nbformat.read(p, as_version=4)) for p in paths)
    with tqdm(total=total, unit="cell", desc="notebooks", dynamic_ncols=True) as bar:
        for path in paths:
            bar.set_description(path.stem)
            row = run_notebook(path, interval=args.interval, progress=bar)
            result["notebooks"].append(row)
            bar.write(f"{row['notebook']:<36} {row['status']:<6} {row['wall_s']:7.1f} s "
                      f"{row['peak_rss_mib']:8.0f} MiB" + (f"  {row['error']}" if row["error"] else "")
                      + (f"  (stalled once: {row['stalled']})" if row["stalled"] else ""))
    steps = [("masking", not args.skip_masking, lambda: masking_comparison(*masking_batch())),
             ("book", not args.skip_book, book_build_times),
             ("unit_tests", not args.skip_unit, unit_test_time),
             ("browser_fill", not args.skip_browser and CHROMIUM.is_file(), browser_fill_record),
             ("make_test", args.make_test, make_test_time)]
    for key, wanted, step in tqdm([s for s in steps if s[1]], desc="other measurements", unit="step"):
        result[key] = step()
    result["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    if Path(args.out).is_file():  # the gradings take half an hour each: kept until measured again
        previous = load_results(args.out)
        result.update({key: previous[key] for key in SEPARATE if previous.get(key)})
    summary = summarize(result)
    out, md = write_results(result, Path(args.out))
    print(markdown(result))
    print(f"wrote {_name(out)} and {_name(md)}")
    failed = summary["failed"] or any(result[k] and result[k].get("status") == "failed"
                                      for k in ("unit_tests", "browser_fill", "make_test")) \
        or (result["book"] and "failed" in (result["book"]["cold"]["status"], result["book"]["rebuild"]["status"]))
    if failed:
        return 1
    return 2 if args.strict and not summary["all_within"] else 0


if __name__ == "__main__":
    sys.exit(main())
