"""One exercise notebook, two outputs: the solution (the book's page) and the student version; and a regrade.

    python -m bertfamily.grading student SOURCE.ipynb DEST.ipynb [--force]
    python -m bertfamily.grading grade NOTEBOOK.ipynb [--timeout 600] [--json]

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
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

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


def main(argv=None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
