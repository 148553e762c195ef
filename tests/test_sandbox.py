"""The grader with an untrusted class: each kind of attack planted, and shown to fail.

The class is the shared one of test_grading_kinds.py (:func:`graded_tiny`): the small exercise made for
the tests, graded once through the command line with two jobs, feedback and a roster. Every attack
is a cell added to the student version (placeholders, so the notebook runs in a kernel's start) or to
the model answer; what it would gain if it worked is full marks, a classmate's zero, or a stopped
run. Here: the honest rows have full marks, the cheats gain nothing and are flagged, a crash stays
in its own row. test_grading_kinds.py checks that nothing is left behind or changed.
"""

import csv
import os
from pathlib import Path

import nbformat
import pytest
from grading_class import MEMORY_MIB, TINY, added, full, row, tiny

from bertfamily import grading
from bertfamily.grading import monitor, mounts, sandbox

pytestmark = [
    pytest.mark.skipif(sandbox.sandbox_problem() is not None, reason=f"no sandbox here: {sandbox.sandbox_problem()}"),
    pytest.mark.slow,
]  # kernels in the sandbox: left out by make unit


def test_honest_students_keep_every_mark(graded_tiny):
    for name in ("olivia_helper", "olivia_import", "correct"):
        r = row(graded_tiny, name)
        assert full(r) and r["flags"] == "", r
    assert row(graded_tiny, "olivia_helper")["outputs"] == "reproduced"  # its `y;` shows nothing, as in Jupyter


@pytest.mark.parametrize(
    "name, said",
    [
        ("mallory_markdown", ""),
        ("mallory_tricks", "defines globals"),
        ("mallory_tricks", "asks bertfamily.checks for expected_counts (the answer key)"),
        ("mallory_forge", "sent a message in the grader's answers format: forged"),
        ("mallory_forge", "task3: 2 answer messages in one check cell"),
        ("mallory_nbval", ""),
        ("mallory_copy", "names '/proc"),
        ("mallory_exporter", "imports runpy"),
        ("mallory_vandal", ""),
    ],
)
def test_cheats_gain_nothing_and_are_flagged(graded_tiny, name, said):
    r = row(graded_tiny, name)
    assert r["status"] == "graded" and r["score"] == "0", r
    assert said in r["flags"], r["flags"]
    if name not in ("mallory_vandal", "mallory_markdown", "mallory_nbval"):
        assert r["flags"], r
    if name == "mallory_markdown":
        assert "had become a markdown cell; the course's code cell was put back" in r["detail"]
    if name == "mallory_nbval":
        assert r["detail"].count("raised SystemExit: not graded?") == 3, r["detail"]


@pytest.mark.parametrize(
    "name, status, words",
    [
        ("mallory_killer", "graded", ""),  # it sees no process of the grader's: only its own namespace
        ("mallory_hog", "error", f"out of memory: the run used more than {MEMORY_MIB} MiB"),
        ("mallory_forkbomb", "error", "too many processes"),
        ("mallory_memfd", "error", f"out of memory: the run used more than {MEMORY_MIB} MiB"),
        ("mallory_link", "invalid", "symbolic link"),
    ],
)
def test_a_crash_is_contained_in_its_own_row(graded_tiny, name, status, words):
    r = row(graded_tiny, name)
    assert r["status"] == status and words in r["detail"], r


def test_no_kernel_reached_the_course_package(graded_tiny):
    assert graded_tiny["after"]["package"] == []  # no file of it holds the vandal's line


def test_a_name_with_a_formula_spaces_and_unicode_is_graded(graded_tiny):
    r = row(graded_tiny, "=1+2 ñandú")
    assert r["status"] == "graded" and r["student"] == "'=1+2 ñandú", r


def test_csv_cells_are_never_formulas(graded_tiny):
    rows = list(csv.reader(open(graded_tiny["out"], encoding="utf-8")))
    student = [r[rows[0].index("student")] for r in rows[1:]]
    assert "'=1+2 ñandú" in student and not any(c.startswith(("=", "+", "-", "@")) for r in rows for c in r)
    assert "=1+2 ñandú.md" in graded_tiny["feedback"]


def test_no_sandbox_refuses_unless_asked(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(
        sandbox, "sandbox_problem", lambda: "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    )
    code = grading.main([str(TINY), "--out", str(tmp_path / "g.csv"), "--reference", str(TINY)])
    err = capsys.readouterr().err
    assert code == 2 and "apt-get install bubblewrap" in err and sandbox.UNSAFE_FLAG in err
    assert not (tmp_path / "g.csv").exists()


def test_processes_left_spinning_cannot_take_a_classmates_cpu(tmp_path, monkeypatch):
    """Spinning daemons use more than the run's share of cores: the run is stopped, saying so. (The
    share is set low here so that the test does not depend on the machine's load.)"""
    nb = added(
        grading.student_version(tiny().reference),
        """
        import os
        import time
        for _ in range(4):
            if os.fork() == 0:
                os.setsid()
                while True:
                    pass
        time.sleep(120)
        """,
        where=2,
    )
    path = tmp_path / "spinner.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(tmp_path))
    # the grace for a kernel's imports, 3 s here (the tiny exercise's run takes about 1 s to start): the spinners
    # are stopped after a few seconds of CPU, not the 10 s a lesson's imports may need
    monkeypatch.setattr(monitor, "CPU_GRACE_S", 3.0)
    limits = grading.Limits(cell_timeout=120, timeout=300, memory_mib=MEMORY_MIB, threads=1, cpu_factor=0.25)
    (r,) = grading.grade_class([path], tiny(), limits, jobs=1, progress=False)
    assert r.status == "error" and "more than its share of the CPU" in r.detail, r
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spinner.ipynb"]


def test_the_sandbox_is_read_only_but_for_its_own_capped_files(tmp_path, monkeypatch):
    """What the kernel sees: its own /etc files, no nested user namespace, a read-only /dev, the
    instructor's folders not listable, its writable space capped at --disk-mib."""
    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(tmp_path))
    code = (
        "import os, subprocess, sys\n"
        "said = []\n"
        "for path in ('/dev/x', '/usr/x', os.path.dirname(os.path.dirname(sys.executable)) + '/x'):\n"
        "    try:\n        open(path, 'w').write('x')\n        said.append('wrote ' + path)\n"
        "    except OSError as e:\n        said.append(e.strerror)\n"
        "said.append(str(subprocess.run(['unshare', '-U', 'true']).returncode != 0))\n"
        "fs = os.statvfs('/')\nsaid.append(str(fs.f_blocks * fs.f_frsize <= 32 * 2**20))\n"
        "said.append(str(sorted(os.listdir('/etc'))[:3]))\n"
        "print(' | '.join(said))"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    run = grading.run_sandboxed(nb, grading.Limits(cell_timeout=60, timeout=120, disk_mib=32), "")
    assert run["status"] == "" and run["exit_code"] == 0, run["log"]
    said = run["results"][0]["outputs"][0]["text"].strip().split(" | ")
    assert said[:3] == ["Read-only file system"] * 3 and said[3:5] == ["True", "True"], said
    assert list(tmp_path.iterdir()) == []
    assert os.path.isdir("/dev")  # nothing of the host changed
    assert Path(mounts.course_package_dir()).is_dir()
