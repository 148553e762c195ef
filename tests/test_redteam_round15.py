"""Red team, round 15 (a helper as a malicious student): each finding as the lecturer would meet it."""

import dataclasses
import json

from bertfamily import grading
from bertfamily.grading.journal import Journal

BREAKS = "v\u2028123\u2028\x85456\x85\u2029789\u2029"  # what str.splitlines, not a file's lines, splits at


def test_a_students_error_message_does_not_stop_resume(tmp_path):
    """Finding 1 (HIGH): Mallory's notebook raised ``ValueError('v\\u2028123\\u2028...')``; her row's detail went
    into the journal as written, and ``--resume`` read the journal with ``splitlines``: pieces of her line ("123",
    "456") were read as rows and every later ``--resume`` of the class stopped with "'int' object is not
    subscriptable". Now each row is one ASCII line, a line ends at "\\n" alone, and a line that is not a row is
    skipped (its submission graded again)."""
    path, settings = tmp_path / "g.csv.journal", {"exercise": "tiny 1", "course": {}}
    mallory = grading.Row("class/mallory.ipynb", "graded", 3, 4, {"task1": 1}, f"cell 9 raised ValueError: {BREAKS}")
    alice = grading.Row("class/alice.ipynb", "graded", 4, 4, {"task1": 1}, "")
    journal = Journal.open(path, settings, resume=False, force=True)
    journal.add("d1", mallory)
    journal.add("d2", alice)
    journal.close()
    assert path.read_bytes().isascii()
    kept = Journal.open(path, settings, resume=True, force=False)
    kept.close()
    assert kept.rows == {("class/mallory.ipynb", "d1"): mallory, ("class/alice.ipynb", "d2"): alice}
    # a journal written as before (the row's text as it is), with lines that are not rows: its rows are read
    head = json.dumps({"journal": "bertfamily-grade journal 1", "settings": settings})
    lines = [
        json.dumps({"submission": r.submission, "sha256": d, "row": dataclasses.asdict(r)}, ensure_ascii=False)
        for d, r in (("d1", mallory), ("d2", alice))
    ]
    path.write_text("\n".join([head, *lines, "[1, 2]", '{"submission": 1}']) + "\n", encoding="utf-8")
    kept = Journal.open(path, settings, resume=True, force=False)
    kept.close()
    assert kept.rows == {("class/mallory.ipynb", "d1"): mallory, ("class/alice.ipynb", "d2"): alice}


def test_a_classmates_file_named_new_does_not_take_an_edited_feedbacks_place(tmp_path):
    """Finding 3 (MEDIUM): the lecturer edited alice.md; on the next run Alice's feedback went beside it as
    alice.new.md, the name of Mallory's own feedback (her file: alice.new.ipynb), and one overwrote the other while the
    warning sent the lecturer to alice.new.md. Now Alice's goes to a name no student of the class has, and the warning
    names it; a regrade of Alice alone keeps clear of Mallory's file too."""
    from grading_class import GRADED, tiny

    from bertfamily.grading import feedbackfiles

    exercise = tiny()
    marks = {t.name: 1 for t in exercise.graded}
    rows = [
        grading.Row(f"class/{n}.ipynb", "graded", s, GRADED, dict(marks), "")
        for n, s in (("alice", 4), ("alice.new", 2))
    ]
    folder = tmp_path / "feedback"
    feedbackfiles.write_all(rows, exercise, folder)
    mallory = (folder / "alice.new.md").read_bytes()
    (folder / "alice.md").write_text((folder / "alice.md").read_text() + "\nSee me about task 4.\n")
    rows[0] = dataclasses.replace(rows[0], score=3)  # a new grading file: Alice's text changes
    for only in (None, {rows[0].submission}):
        written, _, said = feedbackfiles.write_all(rows, exercise, folder, refreshed=only)
        assert (folder / "alice.new.md").read_bytes() == mallory  # Mallory's, as written for her
        assert "Score: **3 of" in (folder / "alice.new-2.md").read_text(encoding="utf-8")
        assert "alice.md (this run's: alice.new-2.md)" in said[0], said
        assert "See me about task 4." in (folder / "alice.md").read_text()
