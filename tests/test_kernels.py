"""The pinned numerical kernels reach every kernel that executes a notebook; tolerant comparison."""

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from bertfamily import grading, kernels

ROOT = Path(__file__).resolve().parents[1]
PROBE = "import torch; print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())"
EXPECTED = "AVX2 2" if kernels.cpu_has_avx2() else None
#: This run's own mode: under ATEN_CPU_CAPABILITY=default (the stand-in for another CPU) children differ.
PINNED_HERE = kernels.mode() == "exact"


def test_pinned_environ_sets_every_variable_and_keeps_the_switch(monkeypatch):
    monkeypatch.setattr(kernels, "cpu_has_avx2", lambda: True)
    env = kernels.pinned_environ({"PATH": "/bin", "OMP_NUM_THREADS": "16"})
    assert {k: env[k] for k in kernels.PINNED} == kernels.PINNED and env["PATH"] == "/bin"
    assert kernels.mode(env) == "exact"
    chosen = kernels.pinned_environ({"ATEN_CPU_CAPABILITY": "default"})
    assert chosen["ATEN_CPU_CAPABILITY"] == "default" and kernels.mode(chosen) == "tolerant"
    assert kernels.pinned_environ({}, threads=3)["OMP_NUM_THREADS"] == "3"
    assert "OMP_WAIT_POLICY" not in env
    assert kernels.pinned_environ({}, shared_cores=True)["OMP_WAIT_POLICY"] == "PASSIVE"
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"  # this run's workers and kernels share the cores


def test_no_avx2_means_no_forced_avx2_and_tolerant(monkeypatch):
    monkeypatch.setattr(kernels, "cpu_has_avx2", lambda: False)
    env = kernels.pinned_environ({})
    assert not set(kernels.ISA) & set(env) and env["OMP_NUM_THREADS"] == "2"
    assert kernels.mode(env) == "tolerant" and "no AVX2" in kernels.describe(env)


def test_reconcile_accepts_only_numbers_within_tolerance():
    ref = "MLM   4.2 ± 0.3%   8.2 ± 0.1%\n"
    assert kernels.reconcile("MLM   4.0 ± 0.4%   8.3 ± 0.1%\n", ref, 0.5) == ref
    assert kernels.reconcile("MLM   5.2 ± 0.3%   8.2 ± 0.1%\n", ref, 0.5) != ref  # 1.0 > 0.5
    assert kernels.reconcile("TLM   4.2 ± 0.3%   8.2 ± 0.1%\n", ref, 9.0) != ref  # the words differ
    assert kernels.reconcile("MLM   4.2 ± 0.3%\n", ref, 9.0) != ref  # a number is missing
    assert kernels.reconcile("x 110", "x 100", 0.0, 0.1) == "x 100"  # relative tolerance
    assert kernels.reconcile("x 111", "x 100", 0.0, 0.1) == "x 111"


def test_a_cell_of_ranked_guesses_may_change_its_words_not_its_lines():
    """ "text": "any" (lesson 3's guesses, where the int8 model's third guess flips near a tie)."""
    ref = "SPRING:\n  int8  election 59% · vote 5% · commons 3%\n"
    moved = "SPRING:\n  int8  election 57% · vote 4% · future 3%\n"
    assert kernels.reconcile(moved, ref, 2.0) != ref  # words are exact by default
    assert kernels.reconcile(moved, ref, 2.0, any_text=True) == ref
    assert kernels.reconcile(moved + "  fp32\n", ref, 2.0, any_text=True) != ref  # a line more
    assert kernels.any_text({"abs": 2, "text": "any", "why": "x"}) and not kernels.any_text({"abs": 2, "why": "x"})
    with pytest.raises(ValueError, match="'text' must be"):
        kernels.tolerance({"abs": 2, "text": "loose", "why": "x"})


@pytest.mark.parametrize("spec", [{"abs": 1}, {"why": "x"}, {"abs": -1, "why": "x"}, 3, {"rel": "a", "why": "x"}])
def test_a_malformed_tolerance_says_what_is_allowed(spec):
    with pytest.raises(ValueError, match="abs"):
        kernels.tolerance(spec)


def test_this_process_and_its_children_run_the_pinned_kernels():
    """The root conftest pinned os.environ before torch: a child (an nbval kernel, an xdist worker) inherits it."""
    if not PINNED_HERE:
        pytest.skip(f"this run is not pinned: {kernels.describe()}")
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == EXPECTED


def _probe_notebook(path, stored: str, measured=None):
    cell = nbformat.v4.new_code_cell(PROBE.replace("print(", "print('value 10.0', ") if measured else PROBE)
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
    if measured:
        cell.metadata["measured"] = measured
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)


def _nbval(path, **env):
    """nbval over one notebook, with the course's root conftest loaded as a plugin (as make test does)."""
    # the root conftest from ROOT, and the package from wherever this run found it (a clone's lib/)
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), **env}
    full.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "conftest",
            "--nbval",
            "--nbval-current-env",
            "-p",
            "no:cacheprovider",
            "-q",
            str(path),
            "--rootdir",
            str(path.parent),
        ],
        capture_output=True,
        text=True,
        cwd=path.parent,
        env=full,
        timeout=900,
    )


def test_a_kernel_started_by_nbval_reports_the_pinned_capability(tmp_path):
    if EXPECTED is None:
        pytest.skip("no AVX2 on this CPU: the capability is not pinned here")
    nb = tmp_path / "probe.ipynb"
    _probe_notebook(nb, EXPECTED + "\n")
    run = _nbval(nb, ATEN_CPU_CAPABILITY="", OMP_NUM_THREADS="7")  # the pin overrides a stray thread count
    assert run.returncode == 0, run.stdout[-2000:]


def test_measured_cells_pass_within_tolerance_only_on_unpinned_kernels(tmp_path):
    capability = "DEFAULT"
    nb = tmp_path / "measured.ipynb"
    _probe_notebook(nb, f"value 10.5 {capability} 2\n", measured={"abs": 1.0, "why": "a test"})
    assert _nbval(nb, ATEN_CPU_CAPABILITY="default").returncode == 0
    _probe_notebook(nb, f"value 12.5 {capability} 2\n", measured={"abs": 1.0, "why": "a test"})
    assert _nbval(nb, ATEN_CPU_CAPABILITY="default").returncode != 0  # 2.5 is outside 1.0
    if EXPECTED is not None:  # pinned: measured cells are compared digit by digit like the rest
        _probe_notebook(nb, "value 10.5 AVX2 2\n", measured={"abs": 1.0, "why": "a test"})
        assert _nbval(nb, ATEN_CPU_CAPABILITY="").returncode != 0


@pytest.mark.sandbox
def test_the_graders_sandbox_runs_pinned_kernels_with_its_share_of_threads(tmp_path, monkeypatch):
    env = grading.sandbox_env(tmp_path, threads=1)
    assert env["OMP_NUM_THREADS"] == "1" and env["OMP_WAIT_POLICY"] == "PASSIVE"
    if not PINNED_HERE:
        pytest.skip(f"this run is not pinned: {kernels.describe()}")
    assert {k: env[k] for k in kernels.ISA} == kernels.ISA
    monkeypatch.chdir(tmp_path)  # the kernel of a real sandboxed run reports them
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
    # the limits only stop a hang: generous, so that a loaded machine (kernel start, torch import) passes
    run = grading.run_sandboxed(nb, grading.Limits(cell_timeout=600, timeout=900, threads=1), "")
    assert run["status"] == "" and run["exit_code"] == 0, run["log"]
    assert run["results"][0]["outputs"][0]["text"] == "AVX2 1\n"


def test_every_measured_cell_states_a_valid_tolerance():
    marked = 0
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if "measured" in cell.get("metadata", {}):
                kernels.tolerance(cell["metadata"]["measured"])
                marked += 1
    assert marked >= 5


def test_pin_keeps_the_rest_of_the_environment():
    code = (
        "import os; os.environ['MPLBACKEND'] = 'agg'; from bertfamily import kernels; kernels.pin(); "
        "print(os.environ['MPLBACKEND'], os.environ['OMP_NUM_THREADS'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["agg", "2"]
