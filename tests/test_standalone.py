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


# ------------------------------------------------------------------ Colab's package set (tools/colab-manifest.toml)

COLAB = {"torch": "2.11.0", "transformers": "5.15.0", "tokenizers": "0.22.2", "numpy": "2.1.3",
         "matplotlib": "3.10.0", "ipykernel": "6.17.1", "ipywidgets": "7.7.1", "jupyter-client": "7.4.9",
         "nbclient": "0.10.4"}


def test_manifest_names_colabs_versions_with_source_and_date():
    spec = standalone.manifest()
    assert spec["source"]["name"] == "googlecolab/backend-info" and spec["source"]["snapshot"] == "2026-08-19"
    assert spec["source"]["python"] == "3.13"
    assert COLAB.items() <= spec["packages"].items()
    assert spec["stand_ins"]["torch"][0] == "2.13.0"  # the local CPU wheel, said as a stand-in
    host = standalone.host_requirements(spec)
    assert "torch==2.13.0" in host and "ipywidgets==7.7.1" in host and "jupyter-client==7.4.9" in host


def test_requirements_admit_what_colab_has():
    # what the Colab cell installs keeps every version Colab already has (torch is Colab's own: skipped)
    import tomllib
    from packaging.requirements import Requirement

    from bertfamily import install
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    colab = standalone.manifest()["packages"]
    checked = []
    for line in project["dependencies"]:
        requirement = Requirement(line)
        name = standalone.normalise(requirement.name)
        if name in colab and name not in ("torch",):
            assert requirement.specifier.contains(colab[name]), f"{line} rules out Colab's {colab[name]}"
            checked.append(name)
    assert {"transformers", "tokenizers", "numpy", "matplotlib", "ipywidgets"} <= set(checked)
    assert "torch" not in map(install.name_of, install.requirements())


@pytest.mark.parametrize("after, expected", [
    ({"ipywidgets": "7.7.1", "numpy": "2.1.3", "sentence-transformers": "6.3.0"}, []),
    ({"ipywidgets": "8.1.9", "numpy": "2.1.3"}, ["ipywidgets 7.7.1 -> 8.1.9"]),
    ({"ipywidgets": "7.7.1"}, ["numpy 2.1.3 -> removed"]),
])
def test_replaced_names_what_the_first_cell_changed(after, expected):
    before = {"ipywidgets": "7.7.1", "numpy": "2.1.3", "tqdm": "4.0"}
    assert standalone.replaced(["ipywidgets", "numpy", "nbclient"], before, after) == expected


def test_a_replaced_package_fails_the_notebook():
    ran = {"error": None, "first_cell": "         colab: True\n"}
    assert standalone.colab_verdict(ran, []) is None
    assert standalone.colab_verdict(ran, ["ipywidgets 7.7.1 -> 8.1.9"]) == \
        "replaced what Colab has: ipywidgets 7.7.1 -> 8.1.9"
    assert standalone.colab_verdict({**ran, "error": "NameError: x"}, ["ipywidgets 7.7.1 -> 8.1.9"]) == "NameError: x"


def test_the_host_says_what_it_cannot_be():
    lines = "\n".join(standalone.describe_host(standalone.manifest(), ["tokenizers==0.22.2 (no wheel)"]))
    assert "snapshot of 2026-08-19" in lines and "Python 3.13 on Colab" in lines
    assert "stand-in: torch 2.13.0 for Colab's 2.11.0" in lines and "not checked: tokenizers==0.22.2" in lines
