"""tools/standalone.py (make colab-check): the parts that decide, on tiny inputs.

The check itself, every notebook alone in an empty folder, runs in CI after make test (.ci/run).
"""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import standalone  # noqa: E402


def test_binder_list_is_environment_yml_without_the_unreachable_index():
    reqs = standalone.binder_requirements()
    assert "torch==2.13.0" in reqs and "jupyter-book>=1.0.4.post1,<2" in reqs
    assert not any(r.startswith("--") for r in reqs)


@pytest.mark.parametrize("text, colab, problem", [
    ("         colab: True\n", True, None),
    ("         colab: False\n", True, "did not look like Colab"),
    ("         colab: False\n", False, None),
    ("UserWarning: bertfamily.kernels.pin() called after torch was imported\n colab: True", True, "before the kernels"),
])
def test_first_cell_problems(text, colab, problem):
    found = standalone.first_cell_problems({"first_cell": text}, colab=colab)
    assert found is None if problem is None else problem in found


def test_snapshot_holds_the_working_tree_as_it_is(tmp_path):
    repo = standalone.snapshot(tmp_path / "snap")
    files = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    assert "pyproject.toml" in files and "lib/bertfamily/install.py" in files
    assert not any(f.startswith((".venv/", "_build/")) for f in files)
    assert (repo / "tools" / "standalone.py").read_bytes() == (ROOT / "tools" / "standalone.py").read_bytes()


def test_refuses_what_is_not_a_notebook_of_the_repository(tmp_path, capsys):
    outside = tmp_path / "x.ipynb"
    outside.write_text("{}")
    with pytest.raises(SystemExit):
        standalone.main([str(outside)])
    assert "not notebooks of this repository" in capsys.readouterr().err
