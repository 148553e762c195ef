"""The strict build of the website is a test: warnings are errors, from an empty output folder."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.book
def test_book_builds_strictly(tmp_path):
    jb = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jb), "build", str(ROOT), "--path-output", str(tmp_path), "-W", "-n",
                             "--keep-going"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    html = tmp_path / "_build" / "html"
    index = (html / "index.html").read_text(encoding="utf-8")
    assert "book/intro.html" in index  # the home page redirects to the intro
    assert "BERT" in (html / "book" / "intro.html").read_text(encoding="utf-8")
    setup = (html / "book" / "00_setup.html").read_text(encoding="utf-8")
    assert "colab.research.google.com" in setup and "mybinder.org" in setup  # launch buttons
    for page in ("01_dynamic_masking", "02_distillation", "03_compression", "04_albert",
                 "05_multilingual", "06_tlm", "exercise_distilbert", "closing"):
        assert (html / "book" / f"{page}.html").is_file(), page
    shutil.rmtree(tmp_path / "_build" / ".doctrees", ignore_errors=True)
