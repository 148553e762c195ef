"""The format gate (issue 49): ``make lint`` runs ``ruff format --check`` over the package, the tools, the
benchmark and the tests. The files it leaves out are pyproject.toml's ``[tool.ruff.format] exclude``, each
for one of two reasons, checked here:

- a lesson shows its functions' code (``show_source``): formatted, the lesson's pages would change, so the
  file is formatted when its lessons are next re-executed;
- formatted, it would pass the length limit of a module (tests/test_one_home.py): it is split first.

Each listed file must still be one that formatting changes, so the list only shrinks.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import MAX_LINES

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")
EXCLUDED = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["format"]["exclude"]


def formatted(path: Path) -> str:
    done = subprocess.run(
        [str(RUFF), "format", "--stdin-filename", str(path), "-"],
        cwd=ROOT,
        check=True,
        input=path.read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
    )
    return done.stdout


def shown_by_a_lesson(path: Path) -> bool:
    """Whether a lesson's stored outputs hold one of the file's ``def`` lines, as show_source prints them."""
    defs = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("def ")]
    outputs = "".join(
        json.dumps(c.get("outputs", []))
        for nb in sorted((ROOT / "book").glob("*.ipynb"))
        for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]
    )
    return any(json.dumps(line)[1:-1] in outputs for line in defs)


@pytest.mark.parametrize("name", EXCLUDED)
def test_each_file_left_unformatted_still_needs_it_and_says_why(name):
    path = ROOT / name
    assert path.is_file(), f"{name} is listed but gone: take it off the list"
    new = formatted(path)
    assert new != path.read_text(encoding="utf-8"), f"{name} is formatted now: take it off the list"
    assert shown_by_a_lesson(path) or len(new.splitlines()) > MAX_LINES, (
        f"{name}: no lesson shows its code and formatted it stays within {MAX_LINES} lines: format it"
    )


def test_the_gate_finds_an_unformatted_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = {  'a':1 }\n", encoding="utf-8")
    done = subprocess.run([str(RUFF), "format", "--check", str(bad)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and "would be reformatted" in done.stdout + done.stderr
