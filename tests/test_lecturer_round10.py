"""The lecturer, round 10 (a helper in a lecturer's place, with a term of Canvas and Moodle exports it wrote): what it
found, each as it would meet it."""

import dataclasses
import os
import subprocess
import sys

import pytest
from grading_class import GRADED, grade_alone, tiny, with_source

from bertfamily import grading
from bertfamily.grading.standins import write_standins

COLAB = """
from google.colab import drive, files, output
drive.mount('/content/drive')
output.enable_custom_widget_manager()
numbers = list(range(10))
x = sum(numbers) - 3
note = "the sum of 0 to 9 is 45, less 3"
print(x)
"""


def test_the_colab_stand_in_says_what_colab_says(tmp_path):
    """drive.mount prints Colab's line and mounts nothing; files.download of a missing file raises Colab's error."""
    folder = write_standins(tmp_path / "standins")
    code = (
        "import google.colab\nfrom google.colab import drive, files\ndrive.mount('/content/drive')\n"
        "google.colab.output.clear()\nassert files.upload() == {}\nfiles.download(__file__ or 'x')\n"
        f"import os\ndrive.mount({str(tmp_path / 'drive')!r})\nprint(os.path.exists({str(tmp_path / 'drive')!r}))\n"
        "files.download('no-such-file.bin')\n"
    )
    script = tmp_path / "colab.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(folder)}, capture_output=True, text=True
    )
    assert done.stdout.splitlines() == ["Mounted at /content/drive", f"Mounted at {tmp_path / 'drive'}", "False"], done
    assert "FileNotFoundError: Cannot find file: no-such-file.bin" in done.stderr, done.stderr


@pytest.mark.sandbox
def test_a_colab_students_drive_mount_in_a_tasks_cell_costs_nothing(tmp_path, monkeypatch):
    """Problem 1 (HIGH): Jane opened task 1's cell with Colab's Drive mount, as Colab notebooks do; the sandbox had no
    google.colab, so the cell raised and every task after it lost its marks (2 of 12 for honest work that passed
    every check on Colab). Now the mount prints what Colab prints and the notebook gets full marks, its outputs
    reproduced, nothing flagged."""
    exercise = tiny()
    nb = with_source(grading.model_answer(exercise.reference), "s1", COLAB, output="Mounted at /content/drive\n42\n")
    row = grade_alone(nb, tmp_path, monkeypatch, "jane.ipynb")
    got = (row.status, row.score, row.max_score, row.outputs, row.flags)
    assert got == ("graded", GRADED, GRADED, "reproduced", ""), row


def test_a_feedback_file_edited_by_hand_is_kept_and_the_new_one_goes_beside_it(tmp_path):
    """Problem 3 (MEDIUM): a line the lecturer added to feedback/1003.md was gone after ``--resume --force`` (new
    points), with no warning. Now a file whose bytes are neither the grader's last nor this run's is kept; this run's
    feedback goes beside it as 1003.new.md and the command says so. A file nobody changed is written again as before."""
    from bertfamily.grading import feedbackfiles

    exercise = tiny()
    rows = [
        grading.Row(f"class/{n}.ipynb", "graded", s, GRADED, {t.name: 1 for t in exercise.graded}, "", student=n)
        for n, s in (("1003", 4), ("1004", 4))
    ]
    folder = tmp_path / "feedback"
    assert feedbackfiles.write_all(rows, exercise, folder)[2] == []
    mine = (folder / "1003.md").read_text(encoding="utf-8") + "\nWell done on task 3 - see me about task 4.\n"
    (folder / "1003.md").write_text(mine, encoding="utf-8")
    rows = [dataclasses.replace(r, score=3) for r in rows]  # new points: every text changes
    written, _, said = feedbackfiles.write_all(rows, exercise, folder)
    assert (folder / "1003.md").read_text(encoding="utf-8") == mine  # the lecturer's line is still there
    assert sorted(p.name for p in written) == ["1003.new.md", "1004.md"]
    assert "Score: **3 of" in (folder / "1003.new.md").read_text(encoding="utf-8")
    assert len(said) == 1 and "1 feedback file changed since the grader wrote it" in said[0] and "1003.md" in said[0]
    assert feedbackfiles.write_all(rows, exercise, folder)[2] == said  # kept on every later run, said again
    assert (folder / "1003.md").read_text(encoding="utf-8") == mine


def test_a_name_defined_above_in_a_cell_that_raised_is_not_called_out_of_order():
    """Problem 4 (MEDIUM): Jane's task 1 cell raised before defining `distilbert`; the feedback of tasks 2-9 said
    "`distilbert` is defined further down, in cell 45: Restart & Run All", cell 45 being the course's
    `distilbert = distilbert_int8_all = None`. Restarting fixes nothing: a cell above defines the name, and it is
    that cell that failed. Only a name no cell above defines is said to come from further down."""
    from nbformat.v4 import new_code_cell, new_notebook

    from bertfamily.grading.causes import defined_below, top_level_definitions

    nb = new_notebook(
        cells=[
            new_code_cell("import missing_module\ndistilbert = load()"),
            new_code_cell("count = distilbert.num_parameters()"),
            new_code_cell("distilbert = distilbert_int8_all = None  # free the memory"),
        ]
    )
    found = top_level_definitions(nb)
    error = "cell 1 raised NameError: name 'distilbert' is not defined"
    assert found["distilbert"] == [0, 2] and defined_below(found, 1, error) is None
    del nb.cells[0]
    found = top_level_definitions(nb)
    assert defined_below(found, 0, "cell 0 raised NameError: name 'distilbert' is not defined").startswith(
        "`distilbert` is defined further down, in cell 1"
    )


def test_the_flagged_rows_are_listed_one_a_line_with_who_and_why():
    """Problem 6 (LOW): the closing summary named the flagged submissions as one comma-separated line of absolute
    paths, with no student and no reason. Now one line each: the student, the file's name, its first flag."""
    from bertfamily.grading.gradebook import summary

    exercise = tiny()
    marks = {t.name: 1 for t in exercise.graded}
    rows = [
        grading.Row(
            "/x/y/carl_1003_5003_ex.ipynb", "graded", 4, 4, marks, "", flags="copy: identical; typed", student="1003"
        ),
        grading.Row("/x/y/dana.ipynb", "graded", 4, 4, marks, "", student="1004"),
    ]
    lines = summary(rows, exercise).splitlines()
    at = lines.index("flagged, for you to read (the flags column), 1:")
    assert lines[at + 1] == "  1003  carl_1003_5003_ex.ipynb: copy: identical" and "dana" not in "\n".join(lines)


def test_the_handout_says_the_deadline_and_what_late_work_costs(tmp_path):
    """Problem 8 (LOW): the student version showed each task's points from the grading file but not its deadline or
    late rule, which the class then met only in their feedback. Now the first Markdown cell says both."""
    from bertfamily.grading import policy, student_version

    exercise = tiny()
    toml = tmp_path / "grading.toml"
    toml.write_text(
        '[points]\ntask1 = 2\n[deadline]\ndue = 2026-03-01T23:59:00+01:00\nlate = "penalty"\n'
        "penalty_percent_per_day = 10\n",
        encoding="utf-8",
    )
    points = policy.handout_points(exercise, policy.load(exercise, toml))
    handout = student_version(exercise.reference, points=points)
    first = next(c for c in handout.cells if c.cell_type == "markdown")
    assert first.source.endswith("**Due 2026-03-01 23:59+01:00; late work loses 10% per started day.**"), first.source
    assert sum("Due 2026" in c.source for c in handout.cells) == 1
    plain = policy.handout_points(exercise, policy.load(exercise, None))
    assert 0 not in plain and not any(
        "Due" in c.source for c in student_version(exercise.reference, points=plain).cells
    )
