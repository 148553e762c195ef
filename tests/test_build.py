"""Building the package gives no warning: what the Colab cell's `pip install git+...` does on every run.

setuptools warns long before it stops: `project.license` as a TOML table was deprecated with "builds
will no longer be supported" after 2027-02-18 (issue 31). The build here is the one pip runs
(setuptools' PEP 517 backend, `build_wheel`), with every warning shown (`-W always`), but with the
setuptools of this environment (the test extra asks for >= 77), not the newest that pip's isolated
build would fetch: the version is printed; a newer setuptools may warn of something new.
"""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = """
import warnings, setuptools
from setuptools import build_meta
warnings.simplefilter("always")
print("setuptools", setuptools.__version__)
print("built", build_meta.build_wheel("dist"))
"""


def test_wheel_builds_without_a_warning(tmp_path):
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "lib", tmp_path / "lib", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    (tmp_path / "dist").mkdir()
    # byte-compiling off (PYTHONDONTWRITEBYTECODE) makes distutils print a "warning:" of its own
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", BUILD],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    warned = [line for line in output.splitlines() if re.search(r"warn|deprecat", line, re.IGNORECASE)]
    assert not warned, "\n".join(warned[:20])
    wheel = next((tmp_path / "dist").glob("bertfamily-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        names = set(z.namelist())
    # bertfamily.checkpoints is a package whose folder holds its data too: the modules and the weights and logs ship
    assert {
        "bertfamily/checkpoints/__init__.py",
        "bertfamily/checkpoints/course.py",
        "bertfamily/checkpoints/course-model.pt",
        "bertfamily/checkpoints/course.json",
    } <= names
    assert "License-Expression: MIT" in metadata
    assert "Programming Language :: Python :: 3.13" in metadata
