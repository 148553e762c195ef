"""Round 6 of the red team: holes found in the grader's own process and in the LMS readers, each with
the safe behaviour asserted (fast: no kernel runs unless said).

- a class folder holding a FIFO, a link to ``/dev/zero`` or a 1 TiB sparse file stalled the whole
  command before anyone was graded (the journal's digest and the copy check read it whole, following
  links, blocking);
- answers the kernel's exporter sends honestly (an expanded tensor, a model whose ``config`` or
  ``modules()`` the student wrote) made the grader's own process rebuild gigabytes or loop for hours;
- a Canvas file whose uploaded name holds Moodle's prefix was read as a Moodle file of the classmate
  whose number it names;
- a notebook of a million tiny cells kept a grading worker busy for many minutes outside every limit.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "grading_tiny.ipynb"


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), str(ROOT)])}


def _cli(args, timeout):
    """The class command in a child process (a hang is a failure, not a stuck test run)."""
    try:
        return subprocess.run([sys.executable, "-m", "bertfamily.grading", *map(str, args)], env=_env(),
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the grader was still running after {timeout} s: one submission stalled the class")


# ------------------------------------------------------------------ files that are not files


def test_a_fifo_a_link_to_dev_zero_and_a_sparse_terabyte_do_not_stall_the_class(tmp_path):
    """Each gets its own invalid row; the command ends (before: the journal's SHA-256 opened the FIFO
    and blocked for ever, read /dev/zero through the link for ever, hashed the terabyte; the copy
    check then read each whole)."""
    from bertfamily.grading.sandbox import sandbox_problem

    if sandbox_problem() is not None:
        pytest.skip(f"no sandbox here: {sandbox_problem()}")
    klass = tmp_path / "class"
    klass.mkdir()
    os.mkfifo(klass / "aaron.ipynb")
    (klass / "zero.ipynb").symlink_to("/dev/zero")
    with open(klass / "huge.ipynb", "wb") as handle:
        handle.truncate(2**40)
    out = tmp_path / "gradebook.csv"
    done = _cli([klass, "--out", out, "--reference", TINY, "--jobs", "1"], timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    assert "FIFO" in text and "symbolic link" in text and "larger than 50 MiB" in text, text
