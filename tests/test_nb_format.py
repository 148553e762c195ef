"""tools/nb.py format: lesson code fits the book's column, and the check fails when it does not."""

import subprocess
import sys
from pathlib import Path

import nbformat

from tools import nb as nb_tool

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, *sources, first_tags=()):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# A lesson")]
    for index, source in enumerate(sources):
        cell = nbformat.v4.new_code_cell(source)
        if index == 0 and first_tags:
            cell.metadata["tags"] = list(first_tags)
        notebook.cells.append(cell)
    nbformat.write(notebook, path)
    return path


def test_format_rewrites_code_cells_and_leaves_the_colab_cell(tmp_path):
    colab = "import sys,  os   # generated: never reformatted"
    path = _notebook(
        tmp_path / "lesson.ipynb", colab, "x=[1,2,\n 3]", "%timeit sum(range(9))", first_tags=["colab-setup"]
    )
    assert nb_tool.format_notebooks([path], check=True) == 1
    assert nb_tool.format_notebooks([path], check=False) == 0
    cells = nbformat.read(path, as_version=4).cells
    assert cells[1].source == colab and cells[3].source == "%timeit sum(range(9))"
    assert cells[2].source == "x = [1, 2, 3]"
    assert nb_tool.format_notebooks([path], check=True) == 0


def test_check_names_a_line_no_formatter_can_shorten(tmp_path, capsys):
    wide = 'print("' + "word " * 25 + '")'
    path = _notebook(tmp_path / "wide.ipynb", wide)
    assert nb_tool.format_notebooks([path], check=True) == 1
    assert "wide.ipynb cell 1: 131 columns" in capsys.readouterr().out  # ruff splits the call, not the string


def test_the_lessons_are_formatted():
    done = subprocess.run(
        [sys.executable, "tools/nb.py", "format", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:]
