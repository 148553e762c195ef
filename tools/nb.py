"""Notebook chores for the course, one command each (run from the repository root).

    python -m tools.nb list                 notebooks in _toc.yml order
    python -m tools.nb execute [NB ...]     re-execute in place (keeps widget state for the website)
    python -m tools.nb benchmark [NB ...]   wall time and peak memory of each in a fresh kernel (benchmarks.run)
    python -m tools.nb colab-cell [--check] write (or check) every notebook's first cell from _config.yml
    python -m tools.nb environment [--check] write (or check) environment.yml from pyproject.toml
    python -m tools.nb format [--check] [NB ...]  ruff-format the lessons' code cells to 88 columns (or check)

``python tools/nb.py ...`` runs the same: this module imports nothing of the repository but ``bertfamily``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

try:  # 2 s less at start wherever the course is installed (bertfamily/imports.py says why)
    import bertfamily.imports  # noqa: F401
except ImportError:
    pass

ROOT = Path(__file__).resolve().parents[1]
FIRST_CELL_TAGS = ["hide-output", "nbval-ignore-output", "colab-setup"]


def toc_notebooks() -> list[Path]:
    """Every .ipynb that _toc.yml lists, in reading order."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    names = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    names.append(node[key])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return [ROOT / f"{n}.ipynb" for n in names if (ROOT / f"{n}.ipynb").is_file()]


def _targets(paths):
    return [Path(p).resolve() for p in paths] if paths else toc_notebooks()


def _client(nb, path, **kw):
    from nbclient import NotebookClient

    return NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}, **kw
    )


def execute(paths) -> None:
    import nbformat

    from bertfamily import kernels

    os.environ.update(kernels.pinned_environ())  # the kernels inherit it: pinned before torch starts
    for path in _targets(paths):
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        _client(nb, path, store_widget_state=True).execute()
        nbformat.write(nb, path)
        print(f"executed {path.relative_to(ROOT)} in {time.perf_counter() - start:.1f} s")


def benchmark(paths) -> int:
    """Notebooks only (no masking, book or unit tests), into _build/benchmark.json and .md.

    A thin call of ``python -m benchmarks.run``, which does the measuring (``make bench`` runs all of it
    and writes the committed ``lib/bertfamily/results/benchmark.json``): a command of its own, as the
    benchmark reads this module's list of notebooks.
    """
    import subprocess

    return subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            *(str(Path(p).resolve()) for p in paths),
            "--skip-book",
            "--skip-masking",
            "--skip-unit",
            "--out",
            str(ROOT / "_build" / "benchmark.json"),
        ],
        cwd=ROOT,
    ).returncode


def repository_url() -> str:
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"].rstrip("/")


def colab_cell_source() -> str:
    """The first cell of every lesson: on Colab only, install the course; everywhere, report versions."""
    return (
        "# On Colab, install the course once per session (elsewhere this only reports versions).\n"
        "import sys, subprocess, importlib.util\n"
        "if \"google.colab\" in sys.modules and importlib.util.find_spec(\"bertfamily\") is None:\n"
        f"    url = \"git+{repository_url()}\"\n"
        "    pip = [sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"--no-deps\", url]\n"
        "    subprocess.run(pip, check=True)\n"
        "    from bertfamily.install import install_requirements  # imports no torch\n"
        "    install_requirements(skip=(\"torch\",))  # keep Colab's own torch\n"
        "from bertfamily.kernels import pin\n"
        "pin()  # the kernels the stored outputs were made with (before torch starts)\n"
        "from bertfamily.env import report\n"
        "generator = report(seed=0)"
    )


def colab_cell(check: bool) -> int:
    import nbformat

    source, stale = colab_cell_source(), []
    for path in toc_notebooks():
        nb = nbformat.read(path, as_version=4)
        first = next((c for c in nb.cells if c.cell_type == "code"), None)
        tags = first.metadata.get("tags", []) if first is not None else []
        if first is not None and first.source == source and all(t in tags for t in FIRST_CELL_TAGS):
            continue
        stale.append(path.relative_to(ROOT))
        if not check:
            if first is not None and "colab-setup" in first.metadata.get("tags", []):
                first.source = source
            else:
                first = nbformat.v4.new_code_cell(source)
                # right after the title cell, before anything else runs
                index = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
                nb.cells.insert(index, first)
            first.metadata["tags"] = sorted(set(first.metadata.get("tags", [])) | set(FIRST_CELL_TAGS))
            nbformat.write(nb, path)
    for rel in stale:
        print(f"{'stale first cell' if check else 'rewrote first cell of'}: {rel}")
    return 1 if (check and stale) else 0


def environment_text() -> str:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["book"]
    lines = [
        "# Binder's environment. Generated from pyproject.toml by `python tools/nb.py environment`;",
        "# a test checks that the two agree. postBuild installs the course package itself.",
        "name: bert-family",
        "channels:",
        "  - conda-forge",
        "dependencies:",
        "  - python=3.11",
        "  - pip",
        "  - pip:",
        "    - --extra-index-url https://download.pytorch.org/whl/cpu",
    ]
    lines += [f"    - {d}" for d in deps]
    return "\n".join(lines) + "\n"


def environment(check: bool) -> int:
    path, text = ROOT / "environment.yml", environment_text()
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return 0
    if check:
        print("environment.yml differs from pyproject.toml: run `python tools/nb.py environment`")
        return 1
    path.write_text(text, encoding="utf-8")
    print("wrote environment.yml")
    return 0


#: The width of code a reader reads: the book's column shows about 88 characters of code.
CODE_WIDTH = 88
#: Notebooks whose code cells keep their layout: the exercise's cells are what students hand in and
#: the grader compares cell by cell.
UNFORMATTED = ("book/exercise_distilbert.ipynb",)


def _formattable(cell) -> bool:
    tags = cell.metadata.get("tags", [])
    return (
        cell.cell_type == "code"
        and "colab-setup" not in tags
        and not any(line.lstrip().startswith(("%", "!")) for line in cell.source.splitlines())
    )


def format_cell(source: str) -> str:
    """``source`` as ``ruff format --line-length 88`` writes it (no final newline, as notebooks keep it)."""
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--line-length",
            str(CODE_WIDTH),
            "--no-cache",
            "--stdin-filename",
            "cell.py",
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise ValueError(f"ruff could not format a cell:\n{source[:400]}\n{done.stderr}")
    return done.stdout.rstrip("\n")


def format_notebooks(paths, check: bool) -> int:
    """Format the code cells of the lessons (not the exercise, not the Colab cell) to 88 columns; with
    ``check``, list the cells that would change and the lines still wider than 88 (strings, comments)."""
    import nbformat

    problems = []
    for path in _targets(paths):
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        if name in UNFORMATTED:
            continue
        nb, changed = nbformat.read(path, as_version=4), False
        for index, cell in enumerate(nb.cells):
            if not _formattable(cell):
                continue
            formatted = format_cell(cell.source)
            if formatted != cell.source:
                changed = True
                if check:
                    problems.append(f"{name} cell {index}: not formatted")
                else:
                    cell.source = formatted
            for line in formatted.splitlines():
                if len(line) > CODE_WIDTH:
                    problems.append(f"{name} cell {index}: {len(line)} columns: {line.strip()[:60]}")
        if changed and not check:
            nbformat.write(nb, path)
    print("\n".join(problems))
    return 1 if problems else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["list", "execute", "benchmark", "colab-cell", "environment", "format"])
    parser.add_argument("notebooks", nargs="*")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(str(p.relative_to(ROOT)) for p in toc_notebooks()))
    elif args.command == "execute":
        execute(args.notebooks)
    elif args.command == "benchmark":
        return benchmark(args.notebooks)
    elif args.command == "colab-cell":
        return colab_cell(args.check)
    elif args.command == "environment":
        return environment(args.check)
    elif args.command == "format":
        return format_notebooks(args.notebooks, args.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
