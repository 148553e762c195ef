"""Reading the checks' verdicts: the ``✓`` / ``✗`` lines that :mod:`bertfamily.checks` prints.

:func:`self_check` is the student's self-check, not a grade: it executes a *copy* of one notebook in a
temporary folder, as the user who runs it, and reports what its checks print (the student's file is
only read, never modified). Grading is the sealed run of :mod:`~bertfamily.grading.pipeline`, for one
notebook (``python -m bertfamily.grading grade``) as for a class.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from bertfamily.grading.student import CHECK, cell_tags

MARK_LINE = re.compile(r"^\s*([✓✗])\s+(.*?):\s*(.*)$")
CHECK_CALL = re.compile(r"\bcheck_\w+\s*\(")


@dataclass
class CheckResult:
    task: str
    passed: bool
    message: str
    cell: int
    hint: str = ""
    #: The checks this line stands for: a check cell that raised or printed nothing, every check it calls.
    checks: int = 1


def output_text(cell) -> str:
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
    stopped = nb.get("metadata", {}).get("self_check_stopped_at")  # execute_copy's cell past its time limit
    above = ""  # the error of a student's cell since the last check: what a check's error often comes from
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if CHECK not in cell_tags(cell):
            if errors:
                above = f" (cell {index} above raised {errors[0].get('ename')}: {errors[0].get('evalue')})"
            continue
        marks = 0
        for line in output_text(cell).splitlines():
            m = MARK_LINE.match(line)
            if m:
                marks += 1
                results.append(CheckResult(m.group(2), m.group(1) == "✓", m.group(3), index))
            elif marks and line.strip().startswith("hint:"):
                hint = line.strip()[len("hint:") :].strip()
                # a check's hints, one a line in the notebook: kept apart (not where detail's "; " splits)
                results[-1].hint = f"{results[-1].hint} · {hint}" if results[-1].hint else hint
        calls = max(1, len(CHECK_CALL.findall(cell.source)))  # the checks that did not print their line
        if errors:
            e = errors[0]
            results.append(
                CheckResult(
                    f"cell {index}", False, f"error {e.get('ename')}: {e.get('evalue')}{above}", index, "", calls
                )
            )
        elif not marks and stopped is not None and index > stopped:
            results.append(
                CheckResult(
                    f"cell {index}",
                    False,
                    f"did not run: the run stopped at cell {stopped}, which ran past the self-check's limit per cell",
                    index,
                    "",
                    calls,
                )
            )
        elif not marks:
            results.append(CheckResult(f"cell {index}", False, "the check printed no result", index, "", calls))
        above = ""
    return results


def execute_copy(path, timeout: int = 600, kernel_name: str = "python3"):
    """Execute a copy of the notebook at ``path`` in a temporary folder; return the executed notebook.

    The file at ``path`` is only read (its bytes and modification time are unchanged); errors in
    cells do not stop the run, they are recorded in the outputs. A cell that runs past ``timeout``
    seconds stops the run there: it gets an error output that says so (``CellTimeoutError``), and the
    cells after it keep no outputs (:func:`report` says that their checks did not run).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no notebook at {path}")
    data = path.read_bytes()
    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    with tempfile.TemporaryDirectory(prefix="bertfamily-grade-") as tmp:
        (Path(tmp) / path.name).write_bytes(data)
        started = []
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name=kernel_name,
            allow_errors=True,
            resources={"metadata": {"path": tmp}},
            on_cell_start=lambda cell, cell_index: started.append(cell_index),
        )
        try:
            client.execute()
        except CellTimeoutError:
            index = started[-1]
            nb.cells[index].outputs.append(
                nbformat.v4.new_output(
                    "error",
                    ename="CellTimeoutError",
                    traceback=[],
                    evalue=f"cell {index} ran past the self-check's limit of {timeout:g} s per cell, "
                    "and the run stopped "
                    f"there (a slower machine than yours? raise the limit: self-check --timeout SECONDS)",
                )
            )
            for cell in nb.cells[index + 1 :]:
                if cell.cell_type == "code":
                    cell.outputs = []
            nb.metadata["self_check_stopped_at"] = index
    return nb


def self_check(path, timeout: int = 600, kernel_name: str = "python3") -> list[CheckResult]:
    """The self-check of the notebook at ``path``: execute a copy (see :func:`execute_copy`) where and as
    whoever calls it, and return what its checks print. Not a grade: it runs unsandboxed, and the checks'
    lines are the notebook's own (the grader re-checks every answer outside the notebook)."""
    return report(execute_copy(path, timeout=timeout, kernel_name=kernel_name))


def print_report(results, stream=None) -> None:
    width = max((len(r.task) for r in results), default=4)
    for r in results:
        print(f"{'✓' if r.passed else '✗'} {r.task:<{width}}  {r.message}", file=stream)
        if r.hint:
            print(f"  {'':<{width}}  hint: {r.hint}", file=stream)
    passed = sum(r.checks for r in results if r.passed)
    print(f"{passed}/{sum(r.checks for r in results)} checks passed (a self-check, not a grade)", file=stream)
