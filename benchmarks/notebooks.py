"""Running a notebook in a fresh kernel, in memory, with its time and peak memory (:func:`run_notebook`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from benchmarks import ROOT
from benchmarks.memory import TreePeak


def relative_name(path: Path) -> str:
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

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_executed=advance,
    )
    row = {
        "notebook": relative_name(path),
        "status": "ok",
        "error": None,
        "cells": cells,
        "loadavg_start": round(os.getloadavg()[0], 2),
    }
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
    row.update(
        peak_rss_mib=round(peak.peak_mib, 1),
        sampled_tree_mib=round(peak.sampled_mib, 1),
        largest_process_mib=round(peak.largest_process_mib, 1),
        samples=peak.samples,
    )
    if progress is not None and done[0] < cells:  # cells a failure skipped
        progress.update(cells - done[0])
    return row, timed_out
