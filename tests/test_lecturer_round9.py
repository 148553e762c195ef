"""The lecturer, round 9 (a helper in a lecturer's place, with a term of Canvas and Moodle exports it wrote): what it
found, each as it would meet it."""

from pathlib import Path

import pytest

from bertfamily import grading
from bertfamily.grading.moodle import read_worksheet

ROOT = Path(__file__).resolve().parents[1]
EXCEL = "Student,ID,SIS User ID,SIS Login ID,Section\r\nBjörn Åkesson,91002,,,Lab B\r\n"


@pytest.mark.parametrize("reader", [grading.read_roster, read_worksheet])
def test_a_csv_a_spreadsheet_saved_says_which_file_and_what_to_do(tmp_path, reader):
    """Excel's 'CSV (Comma delimited)' writes cp1252: the grader stopped with "'utf-8' codec can't decode byte 0xc5"
    and no file named; in a German or French locale it separates with ';', and the roster 'had no id column'."""
    cp1252 = tmp_path / "export.csv"
    cp1252.write_bytes(EXCEL.encode("cp1252"))
    with pytest.raises(ValueError, match=r"export\.csv is not UTF-8 .*CSV UTF-8 \(Comma delimited\)"):
        reader(cp1252)
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_text(EXCEL.replace(",", ";"), encoding="utf-8-sig")
    with pytest.raises(ValueError, match=r"semicolons\.csv separates its columns with ';'"):
        reader(semicolons)


def test_a_csv_of_the_lms_as_it_came_is_read(tmp_path):
    roster = tmp_path / "export.csv"
    roster.write_text(EXCEL, encoding="utf-8-sig")
    assert grading.read_roster(roster)["91002"]["name"] == "Björn Åkesson"


def test_canvas_test_students_file_is_left_out(tmp_path):
    """The blank handout a lecturer submits in Canvas's Student View was graded as an unknown student, with a row,
    a feedback file and a place in the class's table."""
    from bertfamily.grading import lms

    canvas = tmp_path / "canvas"
    canvas.mkdir()
    for name in ("studenttest_99999_5300199_exercise_distilbert.ipynb", "akessonbjorn_91002_5300102_exercise.ipynb"):
        (canvas / name).write_text("{}", encoding="utf-8")
    roster = tmp_path / "export.csv"
    roster.write_text(EXCEL + "\"Student, Test\",99999,,,Lab B\r\n", encoding="utf-8")
    students = grading.read_roster(roster)
    found = {f.key: f for f in lms.find([canvas])}
    assert lms.canvas_test_student(found["99999"], students) and lms.canvas_test_student(found["99999"], None)
    assert not lms.canvas_test_student(found["91002"], students)
    assert lms.canvas_test_student(found["99999"], {"99999": {"canvas_id": "99999"}}) is False  # a roster's own


def test_partial_credit_on_a_task_of_one_check_is_said_and_not_promised(tmp_path, exercise):
    """`task7 = { points = 2, partial = true }` was taken silently and the handout promised "partial credit per
    check", while task 7 makes one check: Dmitri, half right, got 0 of 2 as its one ✗ line says."""
    from bertfamily.grading import policy

    grading_file = tmp_path / "grading.toml"
    grading_file.write_text(
        "[points]\ntask4 = { points = 3, partial = true }\ntask7 = { points = 2, partial = true }\n", encoding="utf-8"
    )
    rules = policy.load(exercise, grading_file)
    assert rules.single == ("task7",) and "partial credit changes nothing for task7" in rules.describe()
    heading = policy.handout_points(exercise, rules)
    numbers = {t.name: n for n, t in enumerate(exercise.tasks, 1)}
    assert heading[numbers["task7"]] == "2 points" and heading[numbers["task4"]] == "3 points, partial credit per check"


def test_a_check_without_its_answer_is_said_once_in_the_feedback(exercise):
    """Chloé's feedback said "check_int8_prediction: task7 needs `int8_bytes` from task6 ..." and then
    "check_int8_prediction had no answer: task7 needs ..." (the gradebook's words and the feedback's)."""
    from grading_helpers import _row

    from bertfamily.grading.gradebook import feedback_markdown

    names = [t.name for t in exercise.graded]
    why = "task7 needs `int8_bytes` from task6, where cell 30 raised NameError"
    row = _row("chloe.ipynb", dict.fromkeys(names, 1) | {"task7": 0})
    row.detail = f"task7: check_int8_prediction: {why}"
    row.feedback = {"task7": [f"check_int8_prediction had no answer: {why}"]}
    assert feedback_markdown(row, exercise).count(why) == 1


def test_one_notebook_graded_with_the_grading_file_shows_the_gradebooks_points(monkeypatch, tmp_path, capsys, exercise):
    """Lecturer 9, problem 8a: ``grade NOTEBOOK`` had no ``--grading``, so a regrade of one student by hand printed
    "9 of 9" where the class's gradebook said 12 of 12 (task 1 worth 2, task 4 worth 3); a typo in the file fails
    before any run."""
    import json

    import nbformat

    from bertfamily.grading import cli

    row = grading.Row("n.ipynb", "graded", 8, 9, {t.name: 1 for t in exercise.graded}, "")
    row.tasks["task4"] = 0
    monkeypatch.setattr(cli, "grade_notebook", lambda *a, **k: row)
    monkeypatch.setattr(cli, "require_sandbox", lambda: None)
    path = tmp_path / "n.ipynb"
    nbformat.write(exercise.reference, path)
    toml = tmp_path / "grading.toml"
    toml.write_text("[points]\ntask1 = 2\ntask4 = 3\n", encoding="utf-8")
    reference = ["--reference", str(ROOT / "book" / "exercise_distilbert.ipynb")]
    assert grading.main(["grade", str(path), *reference, "--grading", str(toml), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["score"], got["max_score"], got["tasks"]["task1"], got["tasks"]["task4"]) == (9, 12, 2, 0), got
    assert grading.main(["grade", str(path), *reference, "--grading", str(toml)]) == 0
    shown = capsys.readouterr().out
    assert "| task1 | 2 of 2 |" in shown and "| task4 | 0 of 3 |" in shown and ": graded, 9 of 12" in shown, shown
    assert grading.main(["grade", str(path), *reference]) == 0 and ": graded, 8 of 9" in capsys.readouterr().out
    # lecturer 10, problem 2: with a deadline in the file, the points apply and the command says the deadline does not
    # (one file has no hand-in time of the class's, nor its extensions): before, it said nothing of it
    toml.write_text("[points]\ntask1 = 2\n[deadline]\ndue = 2026-03-01T23:59:00+01:00\nlate = 'refuse'\n", "utf-8")
    assert grading.main(["grade", str(path), *reference, "--grading", str(toml), "--json"]) == 0
    got, said = capsys.readouterr()
    assert (json.loads(got)["score"], json.loads(got)["late"]) == (9, ""), got  # task 1 worth 2, nothing refused
    assert "deadline is not applied to one notebook: bertfamily-grade applies it to the class" in said, said
    toml.write_text("[points]\ntask99 = 2\n", encoding="utf-8")
    monkeypatch.setattr(cli, "grade_notebook", lambda *a, **k: pytest.fail("graded before the file was read"))
    assert grading.main(["grade", str(path), *reference, "--grading", str(toml)]) == 2
    assert "task99" in capsys.readouterr().err
