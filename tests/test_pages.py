"""What a student reads of each lesson and of the exercise, checked from the committed notebooks.

- No visible line of code is an artefact of wrapping: a comment cut into a fragment on a line of
  its own (``# most``), a closing bracket that carries a comment (``)  # ...``), one expression
  wrapped in brackets of its own (``x = (`` / ``call()`` / ``)``), a loop target unpacked over
  several lines (``for (``), a bracket alone on its line.
- Visible code cells are short: none longer than 25 lines, at most 15% longer than 15.
- No output line is wider than the page's column, where it would be cut off on the right: text
  outputs do not wrap on the website (only code does, ``_static/code-width.css``), and at the
  browser tests' 1280 px viewport a text output box shows ``env.OUTPUT_WIDTH`` characters. The
  exercise's check verdicts are the exception: the grader reads each as one line.

"Visible" is what the website shows: code cells not tagged ``hide-input``, ``remove-input`` or
``remove-cell``; outputs of cells not tagged ``remove-output`` or ``remove-cell``, shown as text
(not a figure, a widget or HTML, which myst-nb shows instead of their text when they exist).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from bertfamily.env import OUTPUT_WIDTH
from tools import nb as nb_tool

ROOT = Path(__file__).resolve().parents[1]

#: Longest visible code cell, and the share of visible cells that may be longer than SHORT lines.
LONGEST, SHORT, LONG_SHARE = 25, 15, 0.15
HIDDEN_INPUT = {"hide-input", "remove-input", "remove-cell"}
HIDDEN_OUTPUT = {"remove-output", "remove-cell"}
#: What myst-nb shows in place of an output's text/plain when the output has it.
RICHER = (
    "application/vnd.jupyter.widget-view+json",
    "application/javascript",
    "text/html",
    "image/svg+xml",
    "image/png",
    "image/jpeg",
    "text/markdown",
    "text/latex",
)
#: What is known not to meet a rule yet, per rule (none now; a lesson named here is xfail, strictly).
NOT_YET: dict[str, set] = {}


def lessons() -> list[str]:
    """The lessons and the exercise of _toc.yml (not the appendix), as paths relative to the root."""
    names = [str(p.relative_to(ROOT)) for p in nb_tool.toc_notebooks()]
    return [n for n in names if Path(n).name[:2].isdigit() or Path(n).name.startswith("exercise")]


def _params(rule: str):
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason="known not to meet this rule yet (NOT_YET)"))
        if name in NOT_YET.get(rule, ())
        else name
        for name in lessons()
    ]


def visible_code_cells(path: Path) -> list:
    nb = nbformat.read(path, as_version=4)
    return [c for c in nb.cells if c.cell_type == "code" and not HIDDEN_INPUT & set(c.metadata.get("tags", []))]


def cell_name(cell, index=None) -> str:
    return f"cell {cell.get('id', index)}"


# ---------------------------------------------------------------- wrapping artefacts

_COMMENT = re.compile(r"^\s*#(?!!)(.*)$")
_CLOSER_WITH_COMMENT = re.compile(r"^\s*[)\]}][)\]},:]*\s*#")
_ONE_EXPRESSION_OPENER = re.compile(r"(=|^\s*return|^\s*assert)\s*\($")
_CLOSER = re.compile(r"^\s*[)\]}][)\]},]*\s*(#.*)?$")
_TARGET_OPENER = re.compile(r"^\s*(for|async for)\s*\($")
_LONE_OPENER = re.compile(r"^\s*[(\[{]\s*$")


def wrapping_artefacts(source: str) -> list[str]:
    """The lines of ``source`` that a formatter's wrapping left behind, each with what it is."""
    lines = source.splitlines()
    found = []
    for i, line in enumerate(lines):
        comment = _COMMENT.match(line)
        above = lines[i - 1] if i else ""
        if comment and _COMMENT.match(above) and len(comment.group(1).split()) <= 2 and comment.group(1).strip():
            found.append(f"line {i + 1}, the tail of the comment above: {line.strip()!r}")
        if _CLOSER_WITH_COMMENT.match(line):
            found.append(f"line {i + 1}, a closing bracket that carries a comment: {line.strip()!r}")
        if (
            _ONE_EXPRESSION_OPENER.search(line)
            and i + 2 < len(lines)
            and _CLOSER.match(lines[i + 2])
            and not lines[i + 1].rstrip().endswith(",")
        ):
            found.append(f"line {i + 1}, one expression in brackets of its own: {line.strip()!r}")
        if _TARGET_OPENER.match(line):
            found.append(f"line {i + 1}, a loop target unpacked over several lines: {line.strip()!r}")
        if _LONE_OPENER.match(line):
            found.append(f"line {i + 1}, a bracket alone on its line")
    return found


def test_wrapping_artefacts_are_found():
    """The finder itself: each construct the formatter left on the pages of round 4 is reported."""
    planted = {
        "comment": "# Two baselines: always guess the\n# most\nx = 1",
        "closer": "from bertfamily.book import (\n    glue,\n    glue_values,\n)  # myst-nb's glue",
        "one expression": "course = (\n    checkpoints.course_data()\n)",
        "call of one argument": "torch.set_num_threads(\n    1\n)  # one thread",
        "signature": "def on_english(\n    o, s\n):  # per layer: the share on English words\n    pass",
        "for target": "for (\n    o,\n    s,\n    c,\n), right in lex_correct.items():\n    pass",
        "lone bracket": "x = [\n    (\n        1, 2\n    )\n]",
    }
    for name, source in planted.items():
        assert wrapping_artefacts(source), f"{name}: not found in {source!r}"
    clean = (
        "# A comment of two lines, the second a\n# full line of words as well.\n"
        "glue_values(\n    a=1,\n    b=2,\n)\nprint(\n    f'{x}'\n)\nfor o, s in pairs:  # a comment\n    pass"
    )
    assert wrapping_artefacts(clean) == []


@pytest.mark.parametrize("name", _params("test_no_wrapping_artefacts"))
def test_no_wrapping_artefacts(name):
    problems = [
        f"{cell_name(c, i)} {found}"
        for i, c in enumerate(visible_code_cells(ROOT / name))
        for found in wrapping_artefacts(c.source)
    ]
    assert not problems, f"{name}:\n" + "\n".join(problems)


# ---------------------------------------------------------------- cell lengths


def code_lines(cell) -> int:
    return len(cell.source.rstrip().splitlines())


@pytest.mark.parametrize("name", _params("test_visible_code_cells_are_short"))
def test_visible_code_cells_are_short(name):
    cells = visible_code_cells(ROOT / name)
    too_long = [f"{cell_name(c, i)}: {code_lines(c)} lines" for i, c in enumerate(cells) if code_lines(c) > LONGEST]
    assert not too_long, f"{name}: visible code cells longer than {LONGEST} lines:\n" + "\n".join(too_long)
    long = [f"{cell_name(c, i)}: {code_lines(c)} lines" for i, c in enumerate(cells) if code_lines(c) > SHORT]
    assert len(long) <= LONG_SHARE * len(cells), (
        f"{name}: {len(long)} of {len(cells)} visible code cells are longer than {SHORT} lines (at most "
        f"{LONG_SHARE:.0%}):\n" + "\n".join(long)
    )


# ---------------------------------------------------------------- outputs within the column

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def shown_text(output) -> str:
    """The text the website shows for one output ('' for a figure, a widget, HTML or a glued value)."""
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return "\n".join(output.traceback)
    data = output.get("data", {})
    if any(mime in data for mime in RICHER):
        return ""
    return data.get("text/plain", "")


#: A check cell's verdicts (the exercise): bertfamily.checks prints each as one line, which the grader
#: reads and compares as one line (bertfamily.grading.marks), so they are not wrapped to the column.
_VERDICT = re.compile(r"^(✓|✗|·|  hint:) ")


def wide_output_lines(path: Path, width: int = OUTPUT_WIDTH) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    wide = []
    for index, cell in enumerate(nb.cells):
        tags = set(cell.metadata.get("tags", []))
        if cell.cell_type != "code" or HIDDEN_OUTPUT & tags:
            continue
        for output in cell.get("outputs", []):
            text = _ANSI.sub("", shown_text(output)).expandtabs()
            for line in re.split(r"\r|\n", text):
                if "check" in tags and _VERDICT.match(line):
                    continue
                if len(line) > width:
                    wide.append(f"{cell_name(cell, index)}: {len(line)} characters: {line[:60]!r}")
    return wide


def test_wide_output_lines_are_found(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(x)")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="x" * (OUTPUT_WIDTH + 1) + "\nshort\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>", "image/png": "iVBO"}),
    ]
    hidden = nbformat.v4.new_code_cell("print(y)", metadata={"tags": ["remove-output"]})
    hidden.outputs = [nbformat.v4.new_output("stream", name="stdout", text="y" * 200)]
    check = nbformat.v4.new_code_cell("ok = checks.check_x(x)", metadata={"tags": ["check"]})
    check.outputs = [nbformat.v4.new_output("stream", name="stdout", text="✓ Task 1 (x): " + "z" * 90)]
    nb.cells = [cell, hidden, check]
    nbformat.write(nb, tmp_path / "page.ipynb")
    found = wide_output_lines(tmp_path / "page.ipynb")
    assert len(found) == 1 and f"{OUTPUT_WIDTH + 1} characters" in found[0]


@pytest.mark.parametrize("name", _params("test_no_output_line_is_cut_off"))
def test_no_output_line_is_cut_off(name):
    wide = wide_output_lines(ROOT / name)
    assert not wide, (
        f"{name}: output lines wider than the page's column ({OUTPUT_WIDTH} characters), cut off "
        f"on the right:\n" + "\n".join(wide)
    )
