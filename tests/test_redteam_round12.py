"""Round 12 of the red team (a helper attacking the sealed grader), on its reading of a submission (no kernel):

- K1: an nbval marker hidden after a line end that only ``str.splitlines`` sees (``\\u2028``, ``\\x0c``, ``\\x1e``
  ... inside a comment) exempted a student's cell from the output comparison: the prepared copy keeps none;
- K2: one pasted screenshot (a Markdown cell's attachment) used up the grader's reading of the notebook, and
  the typed answers found before it were dropped: an image's bytes are not read, and typed answers stand;
- K3: a file a student named like a classmate's Moodle folder put her feedback in that folder of
  ``moodle-feedback.zip``: the outermost Moodle folder is the participant's, and no entry is a path of its own.
"""

import base64
import copy
import zipfile

import pytest
from grading_helpers import _row, passed_run
from nbformat.v4 import new_markdown_cell
from nbval.plugin import find_comment_markers
from test_grading_repairs import exported

from bertfamily import grading
from bertfamily.grading import feedbackfiles, literals, submission
from bertfamily.grading.budget import Budget, OverBudget

#: Every character that ends a line for str.splitlines (and so for nbval), not for Python.
ENDS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _solution(exercise, task: str):
    reference = {c.get("id"): c for c in exercise.reference.cells}
    task = next(t for t in exercise.tasks if t.name == task)
    return next(c for c in task.cells if "solution" in reference[c].metadata.get("tags", []))


@pytest.mark.parametrize("end", ENDS, ids=[repr(e) for e in ENDS])
def test_a_marker_after_any_line_end_nbval_sees_is_taken_out(exercise, end):
    nb = copy.deepcopy(exercise.reference)
    cid = _solution(exercise, "task2")
    cell = next(c for c in nb.cells if c.get("id") == cid)
    for marker in ("NBVAL_IGNORE_OUTPUT", "NBVAL_RAISES_EXCEPTION", "NBVAL_SKIP"):
        cell.source = cell.source.rstrip("\n") + f"  # counts{end}# {marker}"
        assert list(find_comment_markers(cell.source)), "the attack itself: nbval reads the marker"
        prepared = grading.prepare(nb, exercise).nb
        source = next(c.source for c in prepared.cells if c.get("id") == cid)
        assert list(find_comment_markers(source)) == [], (marker, source)
        assert source.startswith(cell.source.split("  # counts")[0])  # the student's code itself stays


def test_taking_markers_out_keeps_every_other_line_as_it_was():
    text = "a = 1\r\n#   NBVAL_SKIP\r\nb = '\u2028'  # a line end inside a string stays\nc = 3"
    assert submission._without_nbval_markers(text) == "a = 1\r\nb = '\u2028'  # a line end inside a string stays\nc = 3"
    plain = "x = 1\n# an ordinary comment\x0cstill\n\ny = 2\n"
    assert submission._without_nbval_markers(plain) == plain


def _png(size: int) -> str:
    return base64.b64encode(literals.IMAGE_MAGIC["image/png"] + bytes(range(256)) * (size // 256)).decode()


def test_a_pasted_screenshot_is_not_read_and_uses_none_of_the_budget(exercise):
    nb = grading.student_version(exercise.reference)
    shot = new_markdown_cell("![shot.png](attachment:shot.png)")
    shot["attachments"] = {"shot.png": {"image/png": _png(60_000)}}
    nb.cells.append(shot)
    budget = Budget(characters=20_000)
    assert literals.in_text_cells(nb, exercise, {42.0}, budget) == []
    # a number stored under an image's type but not an image is still read, and still charged
    shot["attachments"] = {"shot.png": {"image/png": "42"}}
    said = literals.in_text_cells(nb, exercise, {42.0}, Budget(characters=20_000))
    assert len(said) == 1 and "holds the number 42 " in said[0], said
    shot["attachments"] = {"shot.png": {"image/png": "42" + "A" * 30_000}}
    with pytest.raises(OverBudget):
        literals.in_text_cells(nb, exercise, {42.0}, Budget(characters=20_000))


def test_typed_answers_found_stand_when_the_rest_of_the_reading_runs_over(exercise):
    from bertfamily import checks

    distil, bert = checks.expected_counts()
    nb = copy.deepcopy(exercise.reference)
    cell = next(c for c in nb.cells if c.get("id") == _solution(exercise, "task2"))
    cell.source = f"distilbert_count = {distil}\nbert_count = {bert}"
    nb.cells.append(new_markdown_cell("long prose " * 100_000))  # past the grader's 1,000,000 characters
    prepared = grading.prepare(nb, exercise)
    answers = {cid: exported(distilbert_count=distil, bert_count=bert) for cid, _ in exercise.tasks[1].checks}
    score = grading.score_run(prepared, exercise, passed_run(prepared, exercise, answers), grading.Limits())
    flags = "; ".join(score.flags)
    assert "not read by the grader" in flags and "`distilbert_count` typed as a number" in flags, flags
    assert score.marks["task2"] == 0


def test_moodle_feedback_goes_to_the_outermost_participants_folder_only(tmp_path, exercise):
    names = [t.name for t in exercise.graded]
    moodle = tmp_path / "moodle"
    mallory = moodle / "Mallory Smith_222_assignsubmission_file_" / "Bob Jones_333_assignsubmission_file_ex.ipynb"
    bob = moodle / "Bob Jones_333_assignsubmission_file_" / "ex.ipynb"
    eve = moodle / "Eve Doe_444_assignsubmission_file_" / "..\\..\\Startup\\evil_1_assignsubmission_file_x.ipynb"
    flat = moodle / "..\\..\\x_5_assignsubmission_file_y.ipynb"  # a Moodle name that is a path: no entry
    rows = [_row(str(p), dict.fromkeys(names, 1)) for p in (mallory, bob, eve, flat)]
    for r, sid in zip(rows, ("222", "333", "444", "5"), strict=True):
        r.student = sid
    path = feedbackfiles.write_moodle_feedback_zip(rows, exercise, tmp_path / "feedback")
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == [
            "Bob Jones_333_assignsubmission_file_/333.md",
            "Eve Doe_444_assignsubmission_file_/444.md",
            "Mallory Smith_222_assignsubmission_file_/222.md",
        ]


def test_a_moodle_submission_the_zip_has_no_folder_for_is_said(tmp_path, exercise):
    """The re-check of round 12: a participant whose Moodle name holds a path got no entry in the zip, and nothing
    said so. Its feedback file is written as every other, and a warning names it for uploading by hand."""
    names = [t.name for t in exercise.graded]
    moodle = tmp_path / "moodle"
    bob = moodle / "Bob Jones_333_assignsubmission_file_" / "ex.ipynb"
    flat = moodle / "..\\..\\x_5_assignsubmission_file_y.ipynb"
    rows = [_row(str(p), dict.fromkeys(names, 1)) for p in (bob, flat)]
    for r, sid in zip(rows, ("333", "5"), strict=True):
        r.student = sid
    written, bundle, said = feedbackfiles.write_all(rows, exercise, tmp_path / "feedback")
    assert sorted(p.name for p in written) == ["333.md", "5.md"] and bundle is not None
    with zipfile.ZipFile(bundle) as archive:
        assert archive.namelist() == ["Bob Jones_333_assignsubmission_file_/333.md"]
    assert len(said) == 1 and "1 Moodle submission named with a path" in said[0] and "upload 5.md from" in said[0], said
    assert feedbackfiles.write_all(rows[:1], exercise, tmp_path / "again")[2] == []
