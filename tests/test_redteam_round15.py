"""Red team, round 15 (a helper as a malicious student): each finding as the lecturer would meet it."""

import dataclasses
import json

from grading_helpers import touch

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


def _whose(tmp_path, klass, roster_text):
    from grading_class import tiny
    from grading_helpers import _row

    from bertfamily.grading import lms

    (tmp_path / "roster.csv").write_text(roster_text, encoding="utf-8")
    roster = grading.read_roster(tmp_path / "roster.csv")
    found = lms.find([klass])
    names = [t.name for t in tiny().graded]
    rows = lms.attribute([_row(f.display, dict.fromkeys(names, 1)) for f in found], found, tiny(), roster)
    return {r.submission.split("class/")[1]: r for r in rows if r.submission}


def test_a_file_named_for_a_classmate_in_ones_own_folder_is_never_the_classmates(tmp_path):
    """Finding 2 (HIGH): folders named by e-mail address (a Teams, OneDrive or Drive export) matched no roster rule,
    so each file counted for the student its name said: Mallory's ``20002_exercise.ipynb`` in her own folder was Bob's,
    the later of his two, and Canvas's import gave him 2 instead of 4. A folder named as a student's address (the
    roster's e-mail or login column, or first.last@ for the roster's name) is that student's; and a folder that is
    no one's by name is still one student's: a file there named for a student with files elsewhere counts for
    nobody, flagged for the lecturer."""
    klass = tmp_path / "class"
    touch(klass / "alice.fine@uni.example" / "20001_exercise.ipynb", "2026-12-05T10:00+00:00")
    touch(klass / "bob.good@uni.example" / "20002_exercise.ipynb", "2026-12-05T10:00+00:00")
    touch(klass / "mallory.evil@uni.example" / "20003_exercise.ipynb", "2026-12-05T11:00+00:00")
    touch(klass / "mallory.evil@uni.example" / "20002_exercise.ipynb", "2026-12-05T12:00+00:00")
    touch(klass / "xX_gamer_Xx" / "20002_exercise.ipynb", "2026-12-05T12:00+00:00")  # whose? nobody's by name
    touch(klass / "c.dee" / "20004_exercise.ipynb", "2026-12-05T12:00+00:00")  # the roster's login column
    roster = "id,name,login\n20001,Alice Fine,\n20002,Bob Good,\n20003,Mallory Evil,\n20004,Cy Dee,c.dee\n"
    whose = {name: r.student for name, r in _whose(tmp_path, klass, roster).items()}
    assert whose == {
        "alice.fine@uni.example/20001_exercise.ipynb": "20001",
        "bob.good@uni.example/20002_exercise.ipynb": "20002",
        "mallory.evil@uni.example/20002_exercise.ipynb": "20003",  # in her folder: hers, a duplicate of her own
        "mallory.evil@uni.example/20003_exercise.ipynb": "20003",
        "xX_gamer_Xx/20002_exercise.ipynb": "",
        "c.dee/20004_exercise.ipynb": "20004",
    }, whose
    rows = _whose(tmp_path, klass, roster)
    assert rows["xX_gamer_Xx/20002_exercise.ipynb"].flags.startswith("read by hand: 20002's by its name, in the folder")


def test_a_file_named_for_a_classmate_does_not_take_the_classmates_extension(tmp_path):
    """Re-check, finding 2 (HIGH): an extension was looked up by the row's student id, then by the file's name: Mallory,
    two days late with --late refuse, named her file 20001.ipynb in her own folder and got Alice's extension (0 -> 4,
    and the row said "on time by the student's extension"). A row with a student takes only that student's; an
    extension named by a file that has a student is refused before grading, saying to name the student by id."""
    from grading_class import GRADED, tiny
    from grading_helpers import _row

    from bertfamily.grading import lateness, policy

    exercise = tiny()
    marks = {t.name: 1 for t in exercise.graded}
    mallory = _row("class/20003/20001.ipynb", marks, student="20003")
    mallory.submitted, mallory.time_from = "2026-03-03T11:00:00+00:00", "the file's modification time"
    rules = policy.load(
        exercise, due="2026-03-01T23:59:00+01:00", late="refuse", extensions=["20001=2026-03-04T23:59+01:00"]
    )
    alice = _row("class/20001/exercise.ipynb", marks, student="20001")
    alice.submitted, alice.time_from = "2026-03-03T11:00:00+00:00", "the file's modification time"
    row, theirs = policy.apply([mallory, alice], rules, exercise)
    assert (theirs.score, theirs.late) == (GRADED, ""), theirs  # Alice's own extension: on time
    assert (row.score, "extension" in row.time_from) == (0, False), row
    assert row.late.startswith("late by 1 d") and row.late.endswith(f"refused, scores 0 (it earned {GRADED})"), row.late
    students = {"class/20001/exercise.ipynb": "20001", "class/20003/20001.ipynb": "20003"}
    lateness.check_extensions({"20001": None}, students)  # the id: fine
    import pytest

    with pytest.raises(
        ValueError, match=r"an extension for exercise: that is 20001's file; name the student by their id"
    ):
        lateness.check_extensions({"exercise": None}, students)


def test_a_folder_named_with_a_classmates_id_as_a_word_does_not_take_the_classmates_grade(tmp_path):
    """Re-check, finding 1 (HIGH): Mallory named her folder with her own address, mallory.20002@gmail.com; "a roster id
    as a word" came before "the roster's address of a student", so the folder was Bob's (id 20002), her later notebook
    replaced his in Canvas's import, and nothing was flagged. The exact rules (the id, the roster's account, the name)
    now come first; and a folder that only holds an id as a word, or spells a name in an address, does not take a
    student who has a folder elsewhere: both such files are read by hand."""
    klass = tmp_path / "class"
    touch(klass / "20002" / "exercise.ipynb", "2026-12-05T10:00+00:00")
    touch(klass / "mallory.20002@gmail.com" / "exercise.ipynb", "2026-12-05T12:00+00:00")
    touch(klass / "alice_fine@evil.example" / "exercise.ipynb", "2026-12-05T12:00+00:00")
    touch(klass / "Alice Fine" / "exercise.ipynb", "2026-12-05T10:00+00:00")
    touch(klass / "jupyter-20004" / "exercise.ipynb", "2026-12-05T10:00+00:00")  # a hub's home: Cy's, no other
    with_email = "id,name,email\n20001,Alice Fine,\n20002,Bob Good,\n20003,Mallory Evil,mallory.20002@gmail.com\n"
    rows = _whose(tmp_path, klass, with_email + "20004,Cy Dee,\n")
    assert {n: r.student for n, r in rows.items()} == {
        "20002/exercise.ipynb": "20002",
        "mallory.20002@gmail.com/exercise.ipynb": "20003",  # her address in the roster: hers
        "alice_fine@evil.example/exercise.ipynb": "",  # spells Alice's name, but Alice has her own folder
        "Alice Fine/exercise.ipynb": "20001",
        "jupyter-20004/exercise.ipynb": "20004",
    }
    assert rows["alice_fine@evil.example/exercise.ipynb"].flags.startswith("read by hand: 20001's by its name")
    without = "id,name\n20001,Alice Fine\n20002,Bob Good\n20003,Mallory Evil\n20004,Cy Dee\n"
    rows = _whose(tmp_path, klass, without)
    assert rows["20002/exercise.ipynb"].student == "20002"  # Bob's own folder, exactly his id
    assert rows["mallory.20002@gmail.com/exercise.ipynb"].student == "", rows  # an id as a word: not Bob's


def test_notes_merged_into_the_new_feedback_file_are_kept_too(tmp_path):
    """Re-check, finding 3 (LOW): the lecturer merged her note into alice.new.md (this run's feedback, beside her edited
    alice.md); the next run wrote alice.new.md again without asking whether anyone had changed it. An edited .new.md is
    kept as an edited feedback file is: the run's feedback goes to the next free name."""
    from grading_class import GRADED, tiny

    from bertfamily.grading import feedbackfiles

    exercise = tiny()
    rows = [grading.Row("class/alice.ipynb", "graded", 4, GRADED, {t.name: 1 for t in exercise.graded}, "")]
    folder = tmp_path / "feedback"
    feedbackfiles.write_all(rows, exercise, folder)
    (folder / "alice.md").write_text((folder / "alice.md").read_text() + "\nSee me.\n")
    for score, note in ((3, "\nMerged here.\n"), (2, None)):
        rows[0] = dataclasses.replace(rows[0], score=score)
        feedbackfiles.write_all(rows, exercise, folder)
        if note:
            (folder / "alice.new.md").write_text((folder / "alice.new.md").read_text() + note)
    assert "Merged here." in (folder / "alice.new.md").read_text() and "See me." in (folder / "alice.md").read_text()
    assert "Score: **2 of" in (folder / "alice.new-2.md").read_text()
