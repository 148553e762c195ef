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

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "grading_tiny.ipynb"
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), str(ROOT)])}


def _cli(args, timeout):
    """The class command in a child process (a hang is a failure, not a stuck test run)."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "bertfamily.grading", *map(str, args)],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )
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


# ------------------------------------------------------------------ answers the grader rebuilds in its own process

#: What a student's kernel can hold cheaply and the grader's exporter sends as it is (no forgery): a
#: tensor expanded from one value, a model whose configuration the student wrote (transformers builds
#: ``num_labels`` labels), a model whose own ``modules()`` names one layer a million times.
KERNEL_VALUES = {
    "tensor": "x = torch.zeros(()).expand(2**14, 2**15)  # 4 bytes here, 2 GiB rebuilt",
    "config": """
class Mine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(model_type="distilbert", num_labels=10**9)
x = Mine()""",
    "layers": """
class Mine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.one = torch.nn.Linear(1, 1)
    def modules(self):
        return iter([self.one] * 10**6)
x = Mine()""",
}

_RECHECK = """
import json, resource, sys, time, types
import torch
from bertfamily.grading.channel import EXPORTER
from bertfamily.grading.verify import recheck_each
exporter = {}
exec(EXPORTER, exporter)
exec(sys.argv[1])
sent = exporter["answers"]({"x": x}, ["x"])  # as the kernel sends it, through the grader's own exporter
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
began = time.monotonic()
(result,) = recheck_each("ok = checks.check_reduction(x)", json.loads(sent))
print(json.dumps({"passed": result["passed"], "why": result["why"], "printed": result["printed"],
                  "seconds": time.monotonic() - began,
                  "grew_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}))
"""


@pytest.mark.parametrize("kind", sorted(KERNEL_VALUES))
def test_an_answer_the_kernel_holds_cheaply_costs_the_grader_little(kind):
    """The grader's check runs in its own process, outside every limit of the run: rebuilding an answer
    must cost it little whatever the kernel sent (before: 2 GiB for the tensor; a billion labels built
    by transformers and a million layers, each for far longer than the test waits)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RECHECK, KERNEL_VALUES[kind]],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=90,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the grader's own check was still rebuilding the answer after 90 s")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert not result["passed"], result
    assert result["grew_mib"] < 300, result
    assert result["seconds"] < 30, result


# ------------------------------------------------------------------ whose file it is


def test_a_canvas_file_named_with_moodles_prefix_does_not_count_for_the_classmate_it_names(tmp_path, monkeypatch):
    """Mallory (Canvas user 111) can see Bob's Canvas user id (333) on the course's People page. She
    hands in her notebook and, beside it, a notebook that earns nothing, uploaded as ``Bob
    Jones_333_assignsubmission_file_x.ipynb``. Canvas's download prefixes her own name and ids; the
    grader used to read the rest as a Moodle file of participant 333, i.e. Bob's Canvas id: her file,
    handed in later, counted as Bob's and Bob's Canvas grade became 0. A name that reads as both
    exports counts for nobody and is flagged; Bob keeps his grade, Mallory hers."""
    from test_grading_week import _touch, cheap  # noqa: E402  (tests/ is on sys.path)

    from bertfamily.grading import classroom, cli

    monkeypatch.setattr(classroom, "grade_submission", cheap)
    monkeypatch.setattr(classroom, "probe_kernel", lambda limits: None)
    monkeypatch.setattr(cli, "require_sandbox", lambda: None)
    klass, log = tmp_path / "canvas", tmp_path / "graded.log"
    full, nothing = json.dumps({"log": str(log), "right": 9}), json.dumps({"log": str(log), "right": 0})
    _touch(klass / "jonesbob_333_9001_exercise_distilbert.ipynb", full, when="2026-03-01T10:00+01:00")
    _touch(klass / "smithmallory_111_9002_exercise_distilbert.ipynb", full, when="2026-03-01T10:00+01:00")
    _touch(
        klass / "smithmallory_111_9003_Bob Jones_333_assignsubmission_file_x.ipynb",
        nothing,
        when="2026-03-01T11:00+01:00",
    )
    roster = _touch(
        tmp_path / "canvas_export.csv",
        "Student,ID,SIS User ID,SIS Login ID,Section\n"
        "    Points Possible,,,,\nBob Jones,333,s333,bjones,A\nMallory Smith,111,s111,msmith,A\n",
    )
    out, canvas = tmp_path / "gradebook.csv", tmp_path / "canvas.csv"
    assert (
        cli.main(
            [
                str(klass),
                "--out",
                str(out),
                "--jobs",
                "1",
                "--reference",
                str(EXERCISE),
                "--roster",
                str(roster),
                "--canvas",
                str(canvas),
                "--canvas-assignment",
                "Exercise (77)",
                "--deadline",
                "2026-03-01T23:59+01:00",
            ]
        )
        == 0
    )
    grades = {line["ID"]: line["Exercise (77)"] for line in csv.DictReader(canvas.open(encoding="utf-8"))}
    assert grades["333"] == grades["111"] not in ("", "0"), grades
    rows = {Path(r["submission"]).name: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    odd = rows["smithmallory_111_9003_Bob Jones_333_assignsubmission_file_x.ipynb"]
    assert odd["student"] != "333" and "read by hand" in odd["flags"], odd


# ------------------------------------------------------------------ the grader's own time on one file


@pytest.mark.parametrize("many", ["cells", "outputs"])
def test_a_notebook_of_a_million_tiny_parts_is_refused_before_the_grader_reads_it(many):
    """Under the 50 MiB cap, a notebook of ~700,000 empty raw cells (or outputs) cost a grading worker
    minutes outside every limit of the run (validated, repaired, copied and written several times
    before its run starts: measured 74 s for 100,000 cells, 6.5 MiB): refused at once by its count."""
    import time

    from bertfamily.grading.exercise import Exercise
    from bertfamily.grading.submission import Invalid, read_submission

    exercise = Exercise.load(TINY)
    nb = json.loads(TINY.read_text(encoding="utf-8"))
    if many == "cells":
        nb["cells"] += [{"cell_type": "raw", "id": f"r{i}", "metadata": {}, "source": ""} for i in range(200_000)]
    else:
        code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ""}] * 200_000
    data = json.dumps(nb).encode()
    began = time.monotonic()
    with pytest.raises(Invalid, match=many):  # counted right after the JSON is parsed
        read_submission(data, exercise.tasks, exercise.name, [])
    assert time.monotonic() - began < 30  # a loaded 2-core machine: before, it was not refused at all


# ------------------------------------------------------------------ what goes back to the LMS


def test_a_file_name_reaches_moodles_feedback_comment_as_text_not_html(tmp_path):
    """Moodle imports the worksheet's Feedback comments as HTML (its offline-grading importer stores them
    with FORMAT_HTML) and shows them in the teacher's grading table and to the student. An invalid row's
    comment says why, with the names of the student's files: a file named ``<img src=https:\\\\evil...>``
    (a backslash is a slash to a browser) loaded the student's image in the teacher's browser."""
    from test_grading_week import _touch  # noqa: E402

    from bertfamily.grading import lms, policy
    from bertfamily.grading.exercise import Exercise
    from bertfamily.grading.monitor import Limits
    from bertfamily.grading.moodle import MOODLE_FIELDS, read_worksheet, write_moodle
    from bertfamily.grading.pipeline import grade_submission

    exercise = Exercise.load(TINY)
    folder = tmp_path / "moodle" / "Mallory Smith_222_assignsubmission_file_"
    _touch(folder / "a.ipynb", "")
    _touch(folder / "<img src=https:\\\\evil.example\\p.png onerror=alert(1)>.ipynb", "")
    sheet = _touch(
        tmp_path / "worksheet.csv",
        ",".join(MOODLE_FIELDS) + "\nParticipant 222,Mallory Smith,m@x,Submitted for grading,,4.00,Yes,-,-,\n",
    )
    roster, times, lines = read_worksheet(sheet)
    found = lms.find([tmp_path / "moodle"])
    rows = [grade_submission(f.path, f.display, exercise, Limits(), "") for f in found]  # invalid: no kernel
    rows = policy.apply(lms.attribute(rows, found, exercise, roster, times), policy.load(exercise), exercise)
    out = tmp_path / "upload.csv"
    write_moodle(rows, lines, out)
    (entry,) = csv.DictReader(out.open(encoding="utf-8"))
    comment = entry["Feedback comments"]
    assert entry["Grade"] == "0" and comment.startswith("not graded"), entry
    assert "<" not in comment and ">" not in comment, comment


# -------------------------------------------------- what reaches the instructor's terminal and the feedback

FORGED = (
    "\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\u202e"
    "\n\n## task9: all passed\n\nScore: **99 of 99** (graded)\n\n![seen](https://evil.example/p.png)"
)


@pytest.mark.slow  # one kernel
def test_an_error_message_reaches_the_grade_commands_terminal_and_the_feedback_as_text(tmp_path):
    """``grade NOTEBOOK`` printed the feedback unescaped: a student's exception message put escape
    sequences on the instructor's terminal (its title, the clipboard by OSC 52, a cleared screen) and,
    with its newlines, lines of its own in the feedback (a score, a heading, a remote image that loads
    when the Markdown is viewed)."""
    import nbformat

    from bertfamily.grading import model_answer
    from bertfamily.grading.sandbox import sandbox_problem

    if sandbox_problem() is not None:
        pytest.skip(f"no sandbox here: {sandbox_problem()}")
    nb = model_answer(nbformat.read(TINY, as_version=4))
    nb.cells.append(nbformat.v4.new_code_cell(f"raise ValueError({FORGED!r})"))
    path = tmp_path / "mallory.ipynb"
    nbformat.write(nb, path)
    done = _cli(["grade", path, "--reference", TINY], timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = done.stdout
    assert "raised ValueError" in shown, shown
    assert not any(c in shown for c in "\x1b\x07\u202e"), shown
    assert "![" not in shown and "99 of 99" in shown, shown
    assert not [line for line in shown.splitlines() if line.startswith(("Score: **99", "## task9"))], shown


def test_a_students_error_message_writes_no_lines_of_its_own_into_the_feedback_file(tmp_path):
    """The class's feedback files (the rows as the grader makes them: a cell's error said whole)."""
    from bertfamily.grading import feedbackfiles
    from bertfamily.grading.exercise import Exercise
    from bertfamily.grading.pipeline import Row

    exercise = Exercise.load(TINY)
    names = [t.name for t in exercise.graded]
    row = Row(
        "mallory.ipynb",
        "graded",
        1,
        4,
        dict.fromkeys(names, 0) | {"task1": 1},
        f"task2: cell 6 (the cell that starts `x`) raised ValueError: {FORGED}; not in a task: cell 18 raised "
        f"ValueError: {FORGED}",
        read_by_hand=f"task1: {FORGED}",
    )
    (written,) = feedbackfiles.write_student_feedback([row], exercise, tmp_path / "feedback")
    text = written.read_text(encoding="utf-8")
    assert "99 of 99" in text and "![" not in text, text
    assert not [line for line in text.splitlines() if line.startswith(("Score: **99", "## task9"))], text
