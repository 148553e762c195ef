"""The lecturer's week, without a kernel: points (bonus, partial credit), the deadline and which
submission counts, Canvas's and Moodle's exports as they come, the Moodle worksheet, the journal of a
local run (interrupted, resumed) and the regrade of one student in place (the other rows byte for byte).

The command-line tests grade with a cheap stand-in for grade_submission (marks from the file's bytes),
so they exercise the whole command but no sandbox."""

import copy
import csv
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from grading_class import EXERCISE
from grading_helpers import _row

from bertfamily import grading
from bertfamily.grading import cli, counting, feedbackfiles, lms, policy
from bertfamily.grading.moodle import MOODLE_FIELDS, read_worksheet, write_moodle
from bertfamily.grading.pipeline import Row

DUE = "2026-03-01T23:59:00+01:00"


def _grading_file(tmp_path, text):
    path = tmp_path / "grading.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- points


def test_the_default_is_one_point_a_task(exercise):
    rules = policy.load(exercise)
    names = [t.name for t in exercise.graded]
    assert rules.max_score == len(names) and not rules.due and rules.counts == "latest-before-deadline"
    marks = dict.fromkeys(names, 1) | {names[2]: 0}
    (out,) = policy.apply([_row("a.ipynb", marks)], rules, exercise)
    assert out.score == len(names) - 1 and out.tasks == marks and out.max_score == len(names)


def test_points_bonus_and_partial_credit(tmp_path, exercise):
    path = _grading_file(
        tmp_path,
        '[points]\ntask1 = 2\ntask4 = { points = 3, partial = true }\ntask9 = { points = 1.5, bonus = true }\n',
    )
    rules = policy.load(exercise, path)
    names = [t.name for t in exercise.graded]
    assert rules.max_score == (len(names) - 3) + 2 + 3  # task9 is a bonus, on top
    marks = dict.fromkeys(names, 1) | {"task4": 0}
    # task4 prints two checks in the reference: one of them passed
    row = _row("a.ipynb", marks, checks={"task4": {"passed": ["Task 4a"], "failed": ["Task 4b"], "partial": True}})
    (out,) = policy.apply([row], rules, exercise)
    assert out.tasks["task1"] == 2 and out.tasks["task4"] == 1.5 and out.tasks["task9"] == 1.5
    assert out.score == (len(names) - 3) + 2 + 1.5 + 1.5
    typed = _row("b.ipynb", marks, checks={"task4": {"passed": ["Task 4a"], "failed": [], "partial": False}})
    assert policy.apply([typed], rules, exercise)[0].tasks["task4"] == 0  # a typed answer earns no share


@pytest.mark.parametrize(
    "text, words",
    [
        ("[points]\ntask99 = 2\n", "no task task99; the graded tasks are task1"),
        ("[points]\ntask8 = 2\n", "task8 is not graded"),
        ("[points]\ntask1 = -1\n", "0 or more"),
        ("[points]\ntask1 = { points = 2, weight = 3 }\n", "a task allows bonus, partial, points"),
        ("[points]\ntask1 = { bonus = \"yes\" }\n", "must be true or false"),
        ("[deadline]\ndue = \"2026-03-01T23:59\"\n", "has no UTC offset"),
        ("[deadline]\ndue = \"soon\"\n", "not a date and time"),
        (f"[deadline]\ndue = \"{DUE}\"\nlate = \"maybe\"\n", "allowed: none (accepted, flagged), penalty"),
        (f"[deadline]\ndue = \"{DUE}\"\nlate = \"penalty\"\n", "needs penalty_percent_per_day"),
        ("[deadline]\nlate = \"refuse\"\n", "needs a deadline"),
        (
            f"[deadline]\ndue = \"{DUE}\"\ncounts = \"highest\"\n",
            "allowed: latest-before-deadline, latest, first, best",
        ),
        ("[weights]\n", "unknown table weights"),
        ("points = [", "is not TOML"),
    ],
)
def test_a_wrong_grading_file_says_what_is_allowed(tmp_path, exercise, text, words):
    with pytest.raises(ValueError, match=None) as err:
        policy.load(exercise, _grading_file(tmp_path, text))
    assert words in str(err.value), str(err.value)


# --------------------------------------------------------------------------- deadlines


def _at(text):
    return datetime.fromisoformat(text).astimezone(timezone.utc).isoformat()


def test_late_rows_are_flagged_and_the_latest_on_time_counts(exercise):
    names = [t.name for t in exercise.graded]
    seven = dict.fromkeys(names, 1) | {names[0]: 0, names[1]: 0}
    eight = dict.fromkeys(names, 1) | {names[0]: 0}
    rows = [
        _row(
            "c/jane_early.ipynb",
            dict.fromkeys(names, 0),
            student="jane",
            submitted=_at("2026-03-01T10:00+01:00"),
            time_from="the file's modification time",
        ),
        _row(
            "c/jane_ontime.ipynb",
            seven,
            student="jane",
            submitted=_at("2026-03-01T23:00+01:00"),
            time_from="the file's modification time",
        ),
        _row(
            "c/jane_late.ipynb",
            eight,
            student="jane",
            submitted=_at("2026-03-03T01:00+01:00"),
            time_from="the file's modification time",
        ),
    ]
    for late, late_score in (("none", len(names) - 1), ("penalty:10", round((len(names) - 1) * 0.8, 2)), ("refuse", 0)):
        rules = policy.load(exercise, due=DUE, late=late)
        early, ontime, over = policy.apply(rows, rules, exercise)
        assert not early.late and not ontime.late and over.late.startswith("late by 1 d 1 h 1 min")
        assert over.score == late_score, (late, over.late)
        assert ontime.counts == "yes" and over.counts.startswith("no: jane_ontime.ipynb counts")
        assert early.counts.startswith("no: jane_ontime.ipynb")
    latest = policy.apply(rows, policy.load(exercise, due=DUE, counts="latest"), exercise)
    assert [r.counts == "yes" for r in latest] == [False, False, True]
    best = policy.apply(rows, policy.load(exercise, due=DUE, late="refuse", counts="best"), exercise)
    assert [r.counts == "yes" for r in best] == [False, True, False]  # the late 8 scores 0 under refuse
    broken = Row(
        "c/jane_broken.ipynb",
        "invalid",
        None,
        len(names),
        dict.fromkeys(names),
        "empty file",
        student="jane",
        submitted=_at("2026-03-01T23:30+01:00"),
    )
    counted = policy.apply([*rows, broken], policy.load(exercise, due=DUE), exercise)
    assert [r.counts == "yes" for r in counted] == [False, True, False, False]  # an empty file replaces nothing


def test_canvas_late_mark_is_late_whatever_the_file_time(exercise):
    names = [t.name for t in exercise.graded]
    row = _row(
        "smithjane_LATE_12345_67890_exercise.ipynb",
        dict.fromkeys(names, 1),
        student="jane",
        submitted=_at("2026-03-01T20:00+01:00"),
        time_from="the file's modification time; Canvas marked it LATE",
    )
    (out,) = policy.apply([row], policy.load(exercise, due=DUE, late="penalty:25"), exercise)
    assert out.late.startswith("late (the LMS marked it late): -25%") and out.score == len(names) * 0.75


def test_a_canvas_file_canvas_did_not_mark_late_is_on_time_whatever_the_file_time(exercise):
    """A lecturer's trial: zip times carry no time zone, so 23:58 in Berlin unzipped on a UTC machine read as
    00:58 and cost an on-time student 10%. Canvas judged it by its own due date: no LATE mark, on time."""
    names = [t.name for t in exercise.graded]
    row = _row(
        "obriendana_1004_5004_exercise.ipynb",
        dict.fromkeys(names, 1),
        student="1004",
        submitted=_at("2026-03-02T00:58+01:00"),
        time_from="the file's modification time; Canvas did not mark it late",
    )
    (out,) = policy.apply([row], policy.load(exercise, due=DUE, late="penalty:10"), exercise)
    assert not out.late and out.score == len(names)


def test_a_tie_in_time_is_said_in_counts(exercise):
    """Moodle's worksheet has one time a participant: two files of one submission tie, and counts says so."""
    names = [t.name for t in exercise.graded]
    at = _at("2026-03-01T19:00+01:00")
    rows = [
        _row(
            f"m/George_507_assignsubmission_file_/{n}.ipynb",
            dict.fromkeys(names, 1),
            student="507",
            submitted=at,
            time_from="Moodle's worksheet (Last modified (submission))",
        )
        for n in ("final", "v1")
    ]
    first, second = policy.apply(rows, policy.load(exercise, due=DUE), exercise)
    assert second.counts == "yes" and "have one time" in first.counts, first.counts
    assert "check which the student meant" in first.counts


# --------------------------------------------------------------------------- the LMS's layouts


def _touch(path: Path, text="{}", when=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if when:
        stamp = datetime.fromisoformat(when).timestamp()
        os.utime(path, (stamp, stamp))
    return path


def test_a_canvas_file_with_no_name_part_is_its_students_and_a_file_of_no_one_is_said(tmp_path, exercise):
    """The lecturer, round 5 (P1): "Волков, Дмитрий" as a Canvas file name whose name part is empty
    (`_48207_903306_...`) matched no one: his line was blank in Canvas's import and nothing said so."""
    canvas = tmp_path / "canvas"
    _touch(canvas / "_48207_903306_exercise_distilbert.ipynb")
    _touch(canvas / "someone_else.ipynb")
    found = {f.path.name: f for f in lms.find([canvas])}
    assert found["_48207_903306_exercise_distilbert.ipynb"].layout == "canvas"
    roster = grading.read_roster(_touch(tmp_path / "r.csv", "Student,ID,Section\nДмитрий Волков,48207,A\n"))
    names = [t.name for t in exercise.graded]
    rows = [_row(f.display, dict.fromkeys(names, 1)) for f in found.values()]
    got = lms.attribute(rows, list(found.values()), exercise, roster)
    assert {r.student for r in got if r.submission.endswith("_48207_903306_exercise_distilbert.ipynb")} == {"48207"}
    said = grading.summary(got, exercise)
    assert "1 submission matched no student of the roster, so no LMS file has them" in said and "someone_else" in said


def test_canvas_moodle_and_folder_layouts_find_every_student(tmp_path, exercise):
    canvas = tmp_path / "canvas"
    _touch(canvas / "smithjane_12345_67890_exercise_distilbert.ipynb")
    _touch(canvas / "doejohn_LATE_12346_67891_exercise_distilbert-1.ipynb")
    _touch(canvas / "roejim_12347_67892_exercise_distilbert.pdf")
    found = {f.path.name: f for f in lms.find([canvas])}
    assert found["smithjane_12345_67890_exercise_distilbert.ipynb"].layout == "canvas"
    assert found["doejohn_LATE_12346_67891_exercise_distilbert-1.ipynb"].late
    roster = grading.read_roster(
        _touch(
            tmp_path / "canvas.csv",
            "Student,ID,SIS User ID,SIS Login ID,Section,Exercise (77)\n"
            "    Points Possible,,,,,10\nJane Smith,12345,s1,jsmith,A,\n"
            "John Doe,12346,s2,jdoe,A,\nJim Roe,12347,s3,jroe,A,\n"
            "Amy Poe,12348,s4,apoe,B,\n",
        )
    )
    names = [t.name for t in exercise.graded]
    rows = [_row(f.display, dict.fromkeys(names, 1)) for f in found.values() if f.notebook]
    got = {r.student: r for r in lms.attribute(rows, list(found.values()), exercise, roster)}
    assert set(got) == {"12345", "12346", "12347", "12348"}
    assert got["12347"].status == "invalid" and "File > Download" in got["12347"].detail
    assert got["12348"].status == "missing" and "LATE" in got["12346"].time_from

    moodle = tmp_path / "moodle"
    _touch(moodle / "Jane Smith_501_assignsubmission_file_" / "exercise_distilbert.ipynb")
    _touch(moodle / "John Doe_502_assignsubmission_file_" / "exercise_distilbert.ipynb")
    _touch(moodle / "John Doe_502_assignsubmission_file_" / "notes.txt")
    _touch(moodle / "Jim Roe_503_assignsubmission_file_" / "exercise_distilbert.py", when="2026-03-01T09:00+01:00")
    _touch(moodle / "Amy Poe_504_assignsubmission_onlinetext_" / "onlinetext.html")
    sheet = _touch(
        tmp_path / "worksheet.csv",
        "\ufeff"
        + ",".join(f'"{h}"' for h in MOODLE_FIELDS)
        + "\n"
        + '"Participant 501","Jane Smith",jane@x,"Submitted for grading",,10.00,Yes,'
        '"Sunday, 1 March 2026, 11:00 PM",-,\n'
        + '"Participant 502","John Doe",john@x,"Submitted for grading - 9 hours 31 mins late",,10.00,Yes,'
        '"Monday, 2 March 2026, 9:30 AM",-,\n'
        + '"Participant 503","Jim Roe",jim@x,"Submitted for grading",,10.00,Yes,-,-,\n'
        + '"Participant 505","Ann Lee",ann@x,"No submission",,10.00,Yes,-,-,\n',
    )
    roster, times, lines = read_worksheet(sheet)
    found = lms.find([moodle])
    rows = [_row(f.display, dict.fromkeys(names, 1)) for f in found if f.notebook]
    tz = policy.parse_time(DUE, "due").tzinfo
    got = {r.student: r for r in lms.attribute(rows, found, exercise, roster, times, tz)}
    assert got["501"].submitted == _at("2026-03-01T23:00+01:00") and "Moodle's worksheet" in got["501"].time_from
    assert got["502"].status == "graded" and "notes.txt" not in {r.submission for r in got.values()}
    assert got["503"].status == "invalid" and "not a notebook (.py)" in got["503"].detail
    assert got["505"].status == "missing" and "504" not in got  # an online-text folder is no submission
    rules = policy.load(exercise, due=DUE)
    final = policy.apply(list(got.values()), rules, exercise)
    assert [r.student for r in final if r.late] == ["502"]
    out = tmp_path / "moodle_upload.csv"
    said = write_moodle(final, lines, out)
    assert said[0].startswith("Moodle's worksheet has Maximum Grade 10.00 and the grading policy's maximum is"), said
    back = {r["Identifier"]: r for r in csv.DictReader(out.open(encoding="utf-8-sig"))}
    # Moodle scales nothing on upload: full points are written as Moodle's maximum, the comment keeps the points
    assert back["Participant 501"]["Grade"] == "10" and back["Participant 505"]["Grade"] == ""
    assert back["Participant 501"]["Feedback comments"].startswith(f"{len(names)} of {len(names)} points"), back
    assert back["Participant 503"]["Grade"] == "0" and back["Participant 503"]["Feedback comments"].startswith(
        "not graded: not a notebook"
    )
    assert back["Participant 501"]["Last modified (grade)"] == "-"  # Moodle's own cells go back as they were


@pytest.mark.parametrize("name", ["müllerlüdenscheidterik", "núñezjosé", "obriendana", "łukasiewiczjan"])
def test_a_canvas_name_with_any_letters_is_canvas(tmp_path, name):
    """Canvas keeps a name's letters, accents too: the file is its user id's (was: 'not on the roster')."""
    path = _touch(tmp_path / "s" / f"{name}_1005_5005_exercise_distilbert.ipynb")
    (found,) = lms.find([tmp_path / "s"])
    assert found.layout == "canvas" and found.key == "1005", found
    assert path.exists()


def test_a_name_that_runs_on_past_an_id_is_ambiguous(tmp_path, exercise):
    klass = tmp_path / "class"
    for name in ("alice.ipynb", "alice-2.ipynb", "bob_late.ipynb", "carol/exercise.ipynb"):
        _touch(klass / name)
    roster = {s: {"id": s} for s in ("alice", "bob", "carol")}
    found = lms.find([klass])
    names = [t.name for t in exercise.graded]
    got = {
        r.submission: r
        for r in lms.attribute([_row(f.display, dict.fromkeys(names, 1)) for f in found], found, exercise, roster)
    }
    two = got[str(klass / "alice-2.ipynb")]
    assert two.student == "" and two.detail.startswith("ambiguous: the file name runs on past the roster id 'alice'")
    assert got[str(klass / "alice.ipynb")].student == "alice" and got[str(klass / "bob_late.ipynb")].student == "bob"
    assert got[str(klass / "carol" / "exercise.ipynb")].student == "carol"
    files = dict((r.submission, n) for r, n in feedbackfiles.feedback_files(list(got.values())))
    assert (
        files[str(klass / "carol" / "exercise.ipynb")] == "carol.md" and files[str(klass / "alice.ipynb")] == "alice.md"
    )


def test_canvas_tells_invalid_from_missing(tmp_path, exercise):
    names = [t.name for t in exercise.graded]
    roster = {s: {"id": s, "canvas_id": str(n)} for n, s in enumerate("abc")}
    rows = [
        _row("a.ipynb", dict.fromkeys(names, 1), student="a"),
        Row("b.ipynb", "invalid", None, len(names), dict.fromkeys(names), "empty file", student="b"),
        Row("", "missing", None, len(names), dict.fromkeys(names), "no submission", student="c"),
    ]
    out = tmp_path / "canvas.csv"
    grading.write_canvas(rows, roster, "Exercise (77)", out)
    lines = list(csv.reader(out.open(encoding="utf-8")))
    assert [line[-1] for line in lines[2:]] == [str(len(names)), "0", ""]


def _canvas_export(tmp_path, possible="100.00", n=3):
    """Canvas's own gradebook export as it comes (BOM, the Points Possible row, another assignment's column)."""
    head = "Student,ID,SIS User ID,SIS Login ID,Section,Exercise (77),Quiz 1 (78),Current Score\n"
    rows = "    Points Possible,,,,," + possible + ",10.00,(read only)\n"
    rows += "".join(f"S {i},s{i},,,A,,,\n" for i in range(n))
    return _touch(tmp_path / "export.csv", "\ufeff" + head + rows)


def test_canvas_scores_are_written_on_canvases_points_possible(tmp_path, cheap_cli, capsys):
    """The lecturer, round 5 (P2): an assignment out of 100 in Canvas got 14-point scores with no word
    (Canvas scales nothing on import); Moodle's Maximum Grade was honoured."""
    klass, _, _ = _class(tmp_path, n=3)
    roster = _canvas_export(tmp_path)
    assert _run(tmp_path, klass, roster) == 0
    lines = list(csv.reader((tmp_path / "canvas.csv").open(encoding="utf-8")))
    assert lines[1][-1] == "100"
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8"))}
    for line in lines[2:]:
        row = rows[line[2]]
        assert float(line[-1]) == round(float(row["score"]) * 100 / float(row["max_score"]), 2), (line, row)
        assert float(row["score"]) < float(row["max_score"]) < 100
    assert "Canvas's points possible of Exercise (77) is 100, the grading policy's maximum" in capsys.readouterr().err


def test_a_canvas_assignment_not_in_canvases_export_is_refused_before_grading(tmp_path, cheap_cli, capsys):
    """The lecturer, round 5 (P5): a typo in --canvas-assignment made Canvas create a new column on import."""
    klass, _, log = _class(tmp_path, n=2)
    roster = _canvas_export(tmp_path, n=2)
    code = _grade(
        tmp_path,
        klass,
        "--roster",
        str(roster),
        "--canvas",
        str(tmp_path / "c.csv"),
        "--canvas-assignment",
        "Exercise (7)",
    )
    assert code == 2 and not log.exists()
    err = capsys.readouterr().err
    assert "--canvas-assignment 'Exercise (7)' is not a column of Canvas's export" in err and "'Exercise (77)'" in err
    same = _canvas_export(tmp_path, possible="", n=2)  # no points possible there: the policy's maximum
    assert _run(tmp_path, klass, same) == 0
    top = next(csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8")))["max_score"]
    assert list(csv.reader((tmp_path / "canvas.csv").open(encoding="utf-8")))[1][-1] == top


# --------------------------------------------------------------------------- the command: journal, regrade


def cheap(path, display, exercise, limits, sanitize, strict_outputs=False):
    """Stands in for grade_submission: marks from the file's JSON; stops (Ctrl-C) where the file says."""
    spec = json.loads(Path(path).read_text(encoding="utf-8"))
    log = Path(spec["log"])
    with log.open("a", encoding="utf-8") as handle:
        handle.write(Path(display).name + "\n")
    if spec.get("interrupt") and not Path(spec["interrupt"]).exists():
        Path(spec["interrupt"]).touch()
        raise KeyboardInterrupt
    names = [t.name for t in exercise.graded]
    marks = {n: int(i < spec["right"]) for i, n in enumerate(names)}
    return Row(
        display,
        "graded",
        sum(marks.values()),
        len(names),
        marks,
        "",
        "reproduced",
        feedback={names[-1]: ["✗ not yet (hint: again)"]} if spec["right"] < len(names) else {},
        checks={n: {"passed": [n] if marks[n] else [], "failed": [] if marks[n] else [n]} for n in names},
    )


@pytest.fixture
def cheap_cli(monkeypatch):
    from bertfamily.grading import classroom

    monkeypatch.setattr(classroom, "grade_submission", cheap)
    monkeypatch.setattr(classroom, "probe_kernel", lambda limits: None)
    monkeypatch.setattr(cli, "require_sandbox", lambda: None)


def _class(tmp_path, n=6, **special):
    klass, log = tmp_path / "class", tmp_path / "graded.log"
    for i in range(n):
        spec = {"log": str(log), "right": i + 3, **special.get(f"s{i}", {})}
        _touch(klass / f"s{i}.ipynb", json.dumps(spec), when="2026-03-01T12:00+01:00")
    roster = _touch(
        tmp_path / "roster.csv", "id,name,canvas_id\n" + "".join(f"s{i},S {i},{100 + i}\n" for i in range(n + 1))
    )
    return klass, roster, log


def _grade(tmp_path, klass, *extra):
    """The class command on ``klass`` into ``tmp_path / "g.csv"``, one job, the course's exercise."""
    return cli.main([str(klass), "--out", str(tmp_path / "g.csv"), "--jobs", "1", "--reference", str(EXERCISE), *extra])


def _options(tmp_path, roster):
    """The class command's options of these tests: the roster, Canvas, the feedback and the deadline."""
    canvas = ["--canvas", str(tmp_path / "canvas.csv"), "--canvas-assignment", "Exercise (77)"]
    return ["--roster", str(roster), *canvas, "--feedback", str(tmp_path / "feedback"), "--deadline", DUE]


def _run(tmp_path, klass, roster, *extra):
    return _grade(tmp_path, klass, *_options(tmp_path, roster), *extra)


def _lines(path):
    return Path(path).read_bytes().splitlines(keepends=True)


def test_regrading_one_student_changes_their_rows_only(tmp_path, cheap_cli, capsys):
    klass, roster, log = _class(tmp_path)
    grading_file = _grading_file(tmp_path, "[points]\ntask1 = 2\ntask10 = { points = 1, bonus = true }\n")
    assert _run(tmp_path, klass, roster, "--grading", str(grading_file)) == 0
    before = {p: _lines(tmp_path / p) for p in ("g.csv", "canvas.csv")}
    feedback = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "feedback").glob("*.md")}
    assert set(feedback) == {f"s{i}.md" for i in range(6)}
    assert "| task1 | 2 of 2 |" in (tmp_path / "feedback" / "s0.md").read_text(encoding="utf-8")
    log.write_text("", encoding="utf-8")
    spec = json.loads((klass / "s2.ipynb").read_text(encoding="utf-8"))
    _touch(klass / "s2.ipynb", json.dumps({**spec, "right": 9}), when="2026-03-01T13:00+01:00")
    assert _run(tmp_path, klass, roster, "--grading", str(grading_file), "--regrade", "s2") == 0
    assert log.read_text(encoding="utf-8").split() == ["s2.ipynb"]  # no one else ran again
    for name, old in before.items():
        new = _lines(tmp_path / name)
        changed = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
        assert len(old) == len(new) and len(changed) == 1, (name, changed)
        assert b"s2" in new[changed[0]] or b"S 2" in new[changed[0]]
    for p in (tmp_path / "feedback").glob("*.md"):  # (beside them, the grader's record of what it wrote)
        same = (p.read_bytes(), p.stat().st_mtime_ns) == feedback[p.name]
        assert same == (p.name != "s2.md"), p.name  # only s2's feedback was written again
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8"))}
    assert rows["s2"]["score"] == "10" and rows["s6"]["status"] == "missing" and rows["s0"]["counts"] == "yes"
    assert "regraded 1 submission in place" in capsys.readouterr().out
    assert _run(tmp_path, klass, roster, "--regrade", "nobody") == 2
    assert "no such student or submission" in capsys.readouterr().err


def test_an_interrupted_local_run_resumes(tmp_path, cheap_cli, capsys):
    klass, roster, log = _class(tmp_path, s3={"interrupt": str(tmp_path / "stopped")})
    assert _run(tmp_path, klass, roster) == 2
    err = capsys.readouterr().err
    assert "interrupted (Ctrl-C): 3 of 6 submissions graded" in err and "--resume" in err
    assert not (tmp_path / "g.csv").exists()
    log.write_text("", encoding="utf-8")
    assert _run(tmp_path, klass, roster, "--resume") == 0
    assert log.read_text(encoding="utf-8").split() == ["s3.ipynb", "s4.ipynb", "s5.ipynb"]
    resumed = (tmp_path / "g.csv").read_bytes()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert (
        cli.main(
            [
                str(klass),
                "--out",
                str(fresh / "g.csv"),
                "--jobs",
                "1",
                "--reference",
                str(EXERCISE),
                "--roster",
                str(roster),
                "--deadline",
                DUE,
            ]
        )
        == 0
    )
    assert (fresh / "g.csv").read_bytes() == resumed


def test_the_handout_shows_each_tasks_points(tmp_path, capsys):
    path = _grading_file(
        tmp_path, "[points]\ntask2 = 3\ntask4 = { points = 2, partial = true }\ntask10 = { points = 1, bonus = true }\n"
    )
    dest = tmp_path / "handout.ipynb"
    assert cli.main(["student", str(EXERCISE), str(dest), "--grading", str(path)]) == 0
    import nbformat

    headings = [
        line
        for c in nbformat.read(dest, as_version=4).cells
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.startswith("### Task")
    ]
    assert headings[0].endswith("(1 point)") and headings[1].endswith("(3 points)")
    assert headings[3].endswith("(2 points, partial credit per check)") and headings[9].endswith("(1 point, bonus)")
    assert headings[7].endswith("(not graded: its result depends on the machine)")
    bad = _grading_file(tmp_path, "[points]\ntask2 = \"three\"\n")
    assert cli.main(["student", str(EXERCISE), str(tmp_path / "h2.ipynb"), "--grading", str(bad)]) == 2
    assert "give a number of points" in capsys.readouterr().err


def test_a_cells_error_names_the_line_and_is_said_whole():
    from bertfamily.grading.scoring import _problem

    long = "Can't load 'distilbert-base-uncased'. " + "If you were trying to load it from the hub, " * 10 + "end."
    error = {
        "output_type": "error",
        "ename": "OSError",
        "evalue": long,
        "traceback": [
            "\x1b[0;31mOSError\x1b[0m Traceback",
            "Cell \x1b[0;32mIn[7], line 2\x1b[0m\n\x1b[1;32m----> 2\x1b[0m model = AutoModel.from_pretrained(name)",
        ],
    }
    said = _problem(
        9,
        {"outcome": "failed", "message": "x", "outputs": [error]},
        60,
        "# Task 1: load both\nmodel = AutoModel.from_pretrained(name)\n",
    )
    assert said.startswith(
        "cell 9 (the cell that starts `# Task 1: load both`, line 2: "
        "`model = AutoModel.from_pretrained(name)`) raised OSError: Can't load"
    )
    assert said.endswith("end.") and len(said) > 400  # whole, not cut at 200 characters
    syntax = {
        "output_type": "error",
        "ename": "SyntaxError",
        "evalue": "invalid syntax (1234.py, line 1)",
        "traceback": [],
    }
    said = _problem(3, {"outcome": "failed", "message": "x", "outputs": [syntax]}, 60, "x = = 1\n")
    assert (
        said == "cell 3 (the cell that starts `x = = 1`, line 1: `x = = 1`) raised SyntaxError: invalid syntax (line 1)"
    )


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--moodle", "m.csv"], "--moodle needs --moodle-worksheet"),
        (["--late", "refuse"], "a late policy (refuse) needs a deadline"),
        (["--late", "penalty:lots", "--deadline", DUE], "--late penalty:N needs a percentage per day"),
        (["--deadline", "tomorrow"], "is not a date and time"),
        (["--regrade", "s1"], "--regrade updates a gradebook graded before: no"),
        (["--moodle-worksheet", "nothing.csv"], "no Moodle grading worksheet at nothing.csv"),
    ],
)
def test_the_command_refuses_what_it_cannot_do_and_says_why(tmp_path, cheap_cli, capsys, extra, words):
    klass, roster, log = _class(tmp_path, n=2)
    assert _grade(tmp_path, klass, *extra) == 2
    assert words in capsys.readouterr().err
    assert not log.exists() and not (tmp_path / "g.csv").exists()  # refused before anything was graded


def test_a_changed_grading_file_rewrites_the_class_without_running_it(tmp_path, cheap_cli):
    klass, roster, log = _class(tmp_path, n=3)
    assert _run(tmp_path, klass, roster) == 0
    first = {r["student"]: r["score"] for r in csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8"))}
    log.write_text("", encoding="utf-8")
    path = _grading_file(tmp_path, "[points]\ntask1 = 5\n")
    assert _run(tmp_path, klass, roster, "--grading", str(path), "--resume", "--force") == 0
    assert log.read_text(encoding="utf-8") == ""  # no notebook ran again
    then = {r["student"]: r["score"] for r in csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8"))}
    assert all(int(then[s]) == int(first[s]) + 4 for s in ("s0", "s1", "s2")), (first, then)


def test_feedback_shows_the_error_a_check_points_at_and_keeps_a_students_semicolons(exercise):
    """Measured on a class of 6 (lecturer's afternoon): a student who imported lesson 3's calculator read
    "`fp32_mib` was not defined (see the error above)" with no error above it (the ImportError was only in
    the gradebook's `detail`), and a free-text answer with a "; " was cut in two bullets."""
    from bertfamily.grading.gradebook import feedback_markdown

    names = [t.name for t in exercise.graded]
    task = names[3]
    error = (
        f"{task}: cell 20 (the cell that starts `# Predict`) raised ImportError: bertfamily.budget is the "
        "course's own calculator"
    )
    lost = "`fp32_mib` was not defined (see the error above)"
    row = _row(
        "b.ipynb",
        dict.fromkeys(names, 1) | {task: 0},
        read_by_hand=f"{names[6]}: only Linear layers; the embeddings stay fp32; {names[0]}: a note",
    )
    row.detail = f"{error}; {task}: check_predicted_sizes: {lost}"
    row.feedback = {task: [f"check_predicted_sizes had no answer: {lost}"]}
    text = feedback_markdown(row, exercise)
    section = text.split(f"## {task}:", 1)[1].split("##", 1)[0]
    assert "raised ImportError: bertfamily.budget" in section
    assert section.index("raised ImportError") < section.index("see the error above")
    assert f"- {names[6]}: only Linear layers; the embeddings stay fp32\n" in text
    assert f"- {names[0]}: a note" in text


def test_a_class_read_by_pattern_gets_hand_in_times_and_late_flags(tmp_path, cheap_cli):
    """--pattern's rows carry the file's time as every layout's do, so a deadline and its late policy apply
    to them (found by a lecturer helper: with --pattern, nothing was ever late)."""
    klass, roster, log = _class(tmp_path, n=2)
    _touch(klass / "s1.ipynb", json.dumps({"log": str(log), "right": 4}), when="2026-03-03T12:00+01:00")
    assert _run(tmp_path, klass, roster, "--pattern", r"(?P<id>s\d+)", "--late", "refuse") == 0
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8"))}
    assert rows["s1"]["late"].startswith("late by") and rows["s1"]["score"] == "0", rows["s1"]
    assert rows["s0"]["submitted"] and "modification time" in rows["s0"]["time_from"] and not rows["s0"]["late"]


@pytest.mark.parametrize("command", [["{klass}", "--out", "{out}", "--jobs", "1"], ["grade", "{klass}/s0.ipynb"]])
def test_grading_without_a_reference_says_what_to_pass(tmp_path, cheap_cli, monkeypatch, capsys, command):
    """The grader knows no course folder: a class or one notebook graded without --reference is refused
    (exit code 2) with what to pass, before the sandbox is looked for and before anything is read."""
    klass, roster, log = _class(tmp_path, n=2)
    monkeypatch.setattr(cli, "require_sandbox", lambda: pytest.fail("the sandbox was looked for first"))
    argv = [a.format(klass=klass, out=tmp_path / "g.csv") for a in command]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == f"error: {cli.REFERENCE_REQUIRED}\n"
    assert "--reference" in cli.REFERENCE_REQUIRED and "book/exercise_distilbert.ipynb" in cli.REFERENCE_REQUIRED
    assert not log.exists() and not (tmp_path / "g.csv").exists()


def test_a_moodle_file_inside_the_submissions_is_refused(tmp_path, cheap_cli, capsys):
    klass, roster, log = _class(tmp_path, n=2)
    sheet = _touch(
        tmp_path / "worksheet.csv",
        ",".join(f'"{h}"' for h in MOODLE_FIELDS)
        + "\n"
        + '"Participant 501","S 0","s0@example.org","Submitted",,"10.00",,,"2026-03-01T12:00",\n',
    )
    out = klass / "moodle.csv"
    assert _grade(tmp_path, klass, "--moodle-worksheet", str(sheet), "--moodle", str(out)) == 2
    assert "--moodle's folder" in capsys.readouterr().err and not log.exists() and not out.exists()


# --------------------------------------------------------------------------- the lecturer, round 3


def test_a_regrade_with_a_later_deadline_says_whose_line_changed_and_writes_their_feedback(tmp_path, cheap_cli, capsys):
    klass, roster, _ = _class(tmp_path, n=3)
    _touch(klass / "s1.ipynb", (klass / "s1.ipynb").read_text(encoding="utf-8"), when="2026-03-02T12:00+01:00")
    assert _run(tmp_path, klass, roster, "--late", "penalty:10") == 0
    assert "late by" in (tmp_path / "feedback" / "s1.md").read_text(encoding="utf-8")
    capsys.readouterr()
    assert (
        _grade(
            tmp_path,
            klass,
            "--roster",
            str(roster),
            "--feedback",
            str(tmp_path / "feedback"),
            "--late",
            "penalty:10",
            "--deadline",
            "2026-03-03T00:00+01:00",
            "--regrade",
            "s0",
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "the lines of 1 other submission changed too" in err and "s1.ipynb" in err, err
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8"))}
    assert rows["s1"]["late"] == ""
    assert "late by" not in (tmp_path / "feedback" / "s1.md").read_text(encoding="utf-8")  # agrees with the line


def test_one_students_extension_changes_only_her_line(tmp_path, cheap_cli, capsys):
    klass, roster, _ = _class(tmp_path, n=3)
    for name in ("s1", "s2"):
        _touch(
            klass / f"{name}.ipynb",
            (klass / f"{name}.ipynb").read_text(encoding="utf-8"),
            when="2026-03-02T12:00+01:00",
        )
    assert _run(tmp_path, klass, roster, "--late", "penalty:10", "--extension", "s1=2026-03-02T23:59+01:00") == 0
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8"))}
    assert rows["s1"]["late"] == "" and rows["s2"]["late"].startswith("late by")
    assert "extensions: s1 until 2026-03-02T23:59:00+01:00" in capsys.readouterr().out
    assert _run(tmp_path, klass, roster, "--force", "--extension", "nobody=2026-03-02T23:59+01:00") == 2
    assert "an extension for nobody: no such student" in capsys.readouterr().err
    assert _run(tmp_path, klass, roster, "--force", "--extension", "s1") == 2
    assert "write STUDENT=WHEN" in capsys.readouterr().err


def test_an_extension_is_kept_for_the_gradebooks_later_runs(tmp_path, cheap_cli, capsys):
    """The lecturer, round 5 (P3): a regrade of another student a week later, without repeating --extension,
    took Søren's extension back (his line and feedback rewritten with the penalty)."""
    klass, roster, _ = _class(tmp_path, n=3)
    _touch(klass / "s1.ipynb", (klass / "s1.ipynb").read_text(encoding="utf-8"), when="2026-03-02T12:00+01:00")
    assert _run(tmp_path, klass, roster, "--late", "penalty:10", "--extension", "s1=2026-03-02T23:59+01:00") == 0
    kept = tmp_path / "g.csv.extensions"
    assert kept.read_text(encoding="utf-8") == "s1=2026-03-02T23:59+01:00\n"
    before = (tmp_path / "g.csv").read_text(encoding="utf-8")
    capsys.readouterr()
    regrade = [*_options(tmp_path, roster), "--late", "penalty:10"]
    assert _grade(tmp_path, klass, *regrade, "--regrade", "s0") == 0
    assert (
        "extensions given in earlier runs of g.csv, applied again: s1=2026-03-02T23:59+01:00" in capsys.readouterr().err
    )
    assert (tmp_path / "g.csv").read_text(encoding="utf-8") == before
    kept.unlink()  # taken back: the next run applies the deadline to s1
    assert _grade(tmp_path, klass, *regrade, "--regrade", "s0") == 0
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "g.csv").open(encoding="utf-8"))}
    assert rows["s1"]["late"].startswith("late by") and "s1.ipynb" in capsys.readouterr().err


def test_a_class_the_grader_failed_on_entirely_exits_1_and_writes_no_lms_file(tmp_path, cheap_cli, monkeypatch, capsys):
    from bertfamily.grading import classroom

    def broken(path, display, exercise, *args, **kwargs):
        names = [t.name for t in exercise.graded]
        return Row(display, "error", None, len(names), dict.fromkeys(names), "error: the grading worker died")

    monkeypatch.setattr(classroom, "grade_submission", broken)
    klass, roster, _ = _class(tmp_path, n=2)
    assert _run(tmp_path, klass, roster) == 1
    assert "the grader failed on every submission" in capsys.readouterr().err
    assert (tmp_path / "g.csv").is_file() and not (tmp_path / "canvas.csv").exists()
    assert not (tmp_path / "feedback").exists() or not any((tmp_path / "feedback").iterdir())


def test_a_course_changed_while_grading_writes_nothing(tmp_path, cheap_cli, monkeypatch, capsys):
    monkeypatch.setattr(cli, "package_changes", lambda started: ["grading/pipeline.py"])
    klass, roster, _ = _class(tmp_path, n=2)
    assert _run(tmp_path, klass, roster) == 2
    assert "changed while grading (grading/pipeline.py): nothing was written" in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists() and not (tmp_path / "canvas.csv").exists()


def test_moodle_decides_lateness_from_its_status(tmp_path, exercise):
    sheet = _touch(
        tmp_path / "worksheet.csv",
        ",".join(f'"{h}"' for h in MOODLE_FIELDS)
        + "\n"
        + '"Participant 1","A","a@x","Submitted for grading","","10","Yes",'
        '"Monday, 2 March 2026, 8:58 AM","-",""\n'
        + '"Participant 2","B","b@x","Submitted for grading - 1 day 2 hours late - Graded","","10","Yes",'
        '"Tuesday, 3 March 2026, 11:00 AM","-",""\n'
        + '"Participant 3","C","c@x","Submitted for grading - Extension granted until: Thursday, 5 March '
        '2026, 11:59 PM","","10","Yes","Wednesday, 4 March 2026, 9:00 AM","-",""\n',
    )
    roster, times, _ = read_worksheet(sheet)
    assert roster["2"]["status"].endswith("late - Graded")
    names = [t.name for t in exercise.graded]
    found = []
    for pid, name in (("1", "A"), ("2", "B"), ("3", "C")):
        path = _touch(tmp_path / "m" / f"{name}_{pid}_assignsubmission_file_" / "ex.ipynb")
        found += [f for f in lms.find([str(tmp_path / "m")]) if f.path == path]
    rows = [Row(f.display, "graded", len(names), len(names), dict.fromkeys(names, 1), "") for f in found]
    rules = policy.load(exercise, due="2026-03-01T23:59:00-08:00", late="penalty:10")  # Pacific; sheet from Rome
    done = {
        r.student: r
        for r in policy.apply(lms.attribute(rows, found, exercise, roster, times, rules.due.tzinfo), rules, exercise)
    }
    assert done["1"].late == "" and "Moodle's Status does not say late" in done["1"].time_from
    assert done["2"].late.startswith("late by 1 d 2 h (Moodle's Status): -20%"), done["2"].late  # to the hour, as said
    assert done["3"].late == ""  # Moodle counted her extension


def test_an_extension_for_no_student_is_refused_before_anyone_is_graded(tmp_path, cheap_cli, capsys):
    klass, roster, log = _class(tmp_path, n=2)
    assert _run(tmp_path, klass, roster, "--extension", "nobdy=2026-03-02T23:59+01:00") == 2
    err = capsys.readouterr().err
    assert "an extension for nobdy: no such student" in err
    # with their names, and the student who handed in nothing (the lecturer, round 5)
    assert "the students are s0 (S 0), s1 (S 1), s2 (S 2)" in err, err
    assert not log.exists() or log.read_text(encoding="utf-8") == ""  # no one was graded


def test_a_class_that_timed_out_entirely_exits_1(tmp_path, cheap_cli, monkeypatch, capsys):
    from bertfamily.grading import classroom

    def slow(path, display, exercise, *args, **kwargs):
        names = [t.name for t in exercise.graded]
        return Row(display, "timeout", 0, len(names), dict.fromkeys(names, 0), "timeout: 900 s")

    monkeypatch.setattr(classroom, "grade_submission", slow)
    klass, roster, _ = _class(tmp_path, n=2)
    assert _run(tmp_path, klass, roster) == 1
    assert "or each ran out of time" in capsys.readouterr().err and not (tmp_path / "canvas.csv").exists()


def test_one_students_own_failure_beside_missing_ones_is_written_as_usual(tmp_path, cheap_cli, monkeypatch, capsys):
    from bertfamily.grading import classroom

    def broken(path, display, exercise, *args, **kwargs):
        names = [t.name for t in exercise.graded]
        return Row(display, "error", None, len(names), dict.fromkeys(names), "error: the grading worker died")

    monkeypatch.setattr(classroom, "grade_submission", broken)
    klass, roster, _ = _class(tmp_path, n=1)  # the roster has s0 and s1: s1 handed in nothing
    assert _run(tmp_path, klass, roster, "--extension", "s1=2026-03-05T23:59+01:00") == 0  # s1: on the roster
    assert (tmp_path / "canvas.csv").is_file()


@pytest.mark.parametrize(
    "written",
    [
        "Thursday, 26 November 2026, 11:58 PM",  # English
        "Thursday, November 26, 2026, 11:58 PM",  # English (United States): the lecturer, round 5 (P6)
        "Thursday, November 26, 2026, 23:58",
        "2026-11-26T23:58:00",
    ],
)
def test_moodles_english_and_us_english_times_are_read(written):
    from bertfamily.grading.moodle import _moodle_time

    assert _moodle_time(written) == datetime(2026, 11, 26, 23, 58)


def test_a_time_moodle_does_not_write_says_what_it_reads():
    from bertfamily.grading.moodle import _moodle_time

    with pytest.raises(ValueError, match="English \\(United States\\)'s 'Monday, March 6, 2023, 2:15 PM'"):
        _moodle_time("26/11/2026 23:58")


def test_a_class_of_files_copied_at_one_moment_after_the_deadline_is_said(tmp_path, cheap_cli, capsys):
    """The lecturer, round 5 (P8): files copied from e-mail or a USB stick carry the time they were copied: a
    whole class late by the same 9 days, scored 0, with no word but each row's `late`."""
    klass, roster, _ = _class(tmp_path, n=3)
    for i, minute in enumerate((0, 3, 7)):
        name = klass / f"s{i}.ipynb"
        _touch(name, name.read_text(encoding="utf-8"), when=f"2026-03-10T09:0{minute}+01:00")
    assert _run(tmp_path, klass, roster) == 0
    assert "all 3 submissions whose file times decide are late, by times within ten minutes" in capsys.readouterr().err
    _touch(klass / "s0.ipynb", (klass / "s0.ipynb").read_text(encoding="utf-8"), when="2026-03-01T09:00+01:00")
    assert _run(tmp_path, klass, roster, "--force") == 0  # one on time: the times are the students' own
    assert "file times decide" not in capsys.readouterr().err


def test_moodle_feedback_goes_back_in_one_zip_as_moodle_takes_it(tmp_path, exercise):
    """The lecturer, round 5 (P8): Moodle takes feedback files in bulk ("Upload multiple feedback files in a zip",
    a folder per participant as its download names them); the grader wrote only one file per student, and a
    time in UTC where the class's deadline was in +01:00."""
    import zipfile

    names = [t.name for t in exercise.graded]
    moodle = tmp_path / "moodle"
    rows = [
        _row(str(moodle / "Łucja Wróbel_2384711_assignsubmission_file_" / "ex.ipynb"), dict.fromkeys(names, 1)),
        _row(str(moodle / "Ana Pop_2384716_assignsubmission_file_ex <b>.ipynb"), dict.fromkeys(names, 0)),
        _row(str(tmp_path / "canvas" / "doejohn_12346_67891_ex.ipynb"), dict.fromkeys(names, 1)),
    ]
    for r, sid in zip(rows, ("2384711", "2384716", "12346"), strict=True):
        r.student, r.submitted, r.time_from = sid, "2026-11-27T22:58:00+00:00", "the file's modification time"
    rules = policy.load(exercise, due="2026-11-27T23:59:00+01:00")
    path = feedbackfiles.write_moodle_feedback_zip(rows, exercise, tmp_path / "feedback", rules)
    with zipfile.ZipFile(path) as archive:
        entries = {n: archive.read(n).decode("utf-8") for n in archive.namelist()}
    assert sorted(entries) == [
        "Ana Pop_2384716_assignsubmission_file_/2384716.md",
        "Łucja Wróbel_2384711_assignsubmission_file_/2384711.md",
    ]
    text = entries["Ana Pop_2384716_assignsubmission_file_/2384716.md"]
    assert "handed in: 2026-11-27T23:58:00+01:00" in text and "<b>" not in text
    assert feedbackfiles.write_moodle_feedback_zip(rows[2:], exercise, tmp_path / "none", rules) is None
    assert not (tmp_path / "none" / "moodle-feedback.zip").exists()


def test_moodle_4_1s_folders_without_the_last_underscore_are_its_participants(tmp_path, exercise):
    """The lecturer, round 5b (N3): Moodle 4.1 and later name a download's folders "..._assignsubmission_file"
    (mod/assign/classes/downloader.php): every submission matched no one and each Moodle grade came out blank."""
    import zipfile

    moodle = tmp_path / "moodle"
    _touch(moodle / "Zoë Wang_2384730_assignsubmission_file" / "ex.ipynb")
    _touch(moodle / "Wei Li_2384731_assignsubmission_onlinetext" / "onlinetext.html")
    found = {f.path.parent.name: f for f in lms.find([moodle])}
    zoe = found["Zoë Wang_2384730_assignsubmission_file"]
    assert (zoe.layout, zoe.key, zoe.notebook) == ("moodle", "2384730", True)
    assert set(found) == {"Zoë Wang_2384730_assignsubmission_file"}  # an online text is no file handed in
    names = [t.name for t in exercise.graded]
    row = _row(zoe.display, dict.fromkeys(names, 1), student="2384730")
    path = feedbackfiles.write_moodle_feedback_zip([row], exercise, tmp_path / "feedback")
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist() == ["Zoë Wang_2384730_assignsubmission_file/2384730.md"]


def test_two_files_of_one_student_at_one_time_are_said_in_the_terminal(tmp_path, cheap_cli, capsys):
    """The lecturer, round 5b (N4): Moodle's worksheet gives all of a participant's files one time; Zoë's draft,
    whose name sorts last, counted, and only the counts column said so."""
    klass, roster, _ = _class(tmp_path, n=2)
    text = (klass / "s0.ipynb").read_text(encoding="utf-8")
    _touch(klass / "s0_zdraft.ipynb", text, when="2026-03-01T12:00+01:00")
    assert _run(tmp_path, klass, roster) == 0
    err = capsys.readouterr().err
    assert "1 submission tied with another of the student's (one time for both)" in err and "s0.ipynb" in err, err


def test_a_students_feedback_names_her_extension(exercise):
    """The lecturer, round 5b: Søren's feedback said "Canvas marked it LATE" and no late penalty, with no word of
    the extension that explained both."""
    names = [t.name for t in exercise.graded]
    row = _row("canvas/kierkegardsoren_LATE_48205_903304_ex.ipynb", dict.fromkeys(names, 1), student="48205")
    row.submitted, row.time_from = "2026-11-29T10:00:00+00:00", "the file's modification time; Canvas marked it LATE"
    rules = policy.load(exercise, due="2026-11-27T23:59:00+01:00", extensions=["48205=2026-12-01T23:59:00+01:00"])
    text = feedbackfiles.feedback_text(row, exercise, rules)
    assert "- your deadline: 2026-12-01T23:59:00+01:00 (an extension; the class's: 2026-11-27T23:59:00+01:00)" in text
    other = _row("canvas/x_48206_903305_ex.ipynb", dict.fromkeys(names, 1), student="48206")
    assert "your deadline" not in feedbackfiles.feedback_text(other, exercise, rules)


def test_a_draft_handed_in_with_the_final_notebook_does_not_replace_it(exercise):
    """The lecturer, round 8: Olúwaseun handed in his notebook and its draft in one submission (one time for both);
    the draft's name sorts last, and its 9 went into Canvas's and Moodle's files instead of his 18."""
    names = [t.name for t in exercise.graded]
    final = _row("canvas/adeyemi_81008_990008_exercise.ipynb", dict.fromkeys(names, 1), student="81008")
    draft = _row("canvas/adeyemi_81008_990009_exercise_draft.ipynb", dict.fromkeys(names[:4], 1), student="81008")
    for r in (final, draft):
        r.submitted, r.time_from = "2026-11-27T20:00:00+00:00", "the file's modification time"
    for counts in ("latest-before-deadline", "latest", "first"):
        rules = policy.load(exercise, due="2026-11-27T23:59:00+01:00", counts=counts)
        rows = policy.apply([copy.deepcopy(final), copy.deepcopy(draft)], rules, exercise)
        chosen = counting.counted_rows(rows)["81008"]
        assert chosen.submission == final.submission, (counts, [(r.submission, r.counts) for r in rows])
        other = next(r for r in rows if r is not chosen)
        assert (
            other.counts.startswith("no: adeyemi_81008_990008_exercise.ipynb counts") and counting.TIE in other.counts
        ), other.counts


def test_a_regrade_says_why_other_lines_changed(tmp_path, cheap_cli, capsys, monkeypatch):
    """The lecturer, round 8: a regrade with the first run's options warned that "the grading options differ"
    when the other lines changed only by a copy flag (the regraded file's code matched theirs)."""
    from bertfamily.grading import classroom

    klass, roster, _ = _class(tmp_path, n=3)
    assert _run(tmp_path, klass, roster) == 0
    capsys.readouterr()
    copied = {
        str(klass / "s0.ipynb"): ["copy: same code as s1.ipynb"],
        str(klass / "s1.ipynb"): ["copy: same code as s0.ipynb"],
    }
    monkeypatch.setattr(
        classroom, "copy_flags", lambda found, exercise: {k: copied[k] for _, k in found if k in copied}
    )
    assert _run(tmp_path, klass, roster, "--regrade", "s0") == 0
    err = capsys.readouterr().err
    assert "warning: a copy flag changed" in err and "s1.ipynb" in err and "options differ" not in err, err
    assert _run(tmp_path, klass, roster, "--regrade", "s0", "--deadline", "2026-02-01T00:00+01:00") == 0
    assert "warning: the grading options differ" in capsys.readouterr().err


def test_a_regrade_names_the_feedback_an_earlier_run_left_for_the_student(tmp_path, cheap_cli, capsys):
    """The lecturer, round 8 (problem 6): a student handed in a draft beside her notebook, the lecturer removed the
    draft and regraded her: her new feedback file was written, and the two files of the first run (one a file) stayed
    beside it, unnamed. They are named in a warning, and kept (a lecturer may have written in one)."""
    klass, log = tmp_path / "class", tmp_path / "graded.log"
    for folder, stem, right in (("s0", "final", 9), ("s0", "draft", 3), ("s1", "work", 5)):
        _touch(
            klass / folder / f"{stem}.ipynb",
            json.dumps({"log": str(log), "right": right}),
            when="2026-03-01T12:00+01:00",
        )
    roster = _touch(tmp_path / "roster.csv", "id,name,canvas_id\ns0,S 0,100\ns1,S 1,101\n")
    assert _run(tmp_path, klass, roster) == 0
    feedback = tmp_path / "feedback"
    assert sorted(p.name for p in feedback.glob("*.md")) == ["s0-draft.md", "s0-final.md", "s1.md"]
    assert "earlier run" not in capsys.readouterr().err
    (klass / "s0" / "draft.ipynb").unlink()
    assert _run(tmp_path, klass, roster, "--regrade", "s0") == 0
    err = capsys.readouterr().err
    assert "2 feedback files in" in err and "s0-draft.md, s0-final.md" in err and "s1.md" not in err, err
    assert "delete them before passing the feedback on" in err
    assert sorted(p.name for p in feedback.glob("*.md")) == ["s0-draft.md", "s0-final.md", "s0.md", "s1.md"]
    assert _run(tmp_path, klass, roster, "--regrade", "s1") == 0  # s1's own files are all this run's
    assert "earlier run" not in capsys.readouterr().err


def test_a_regrade_of_a_class_downloaded_again_into_another_folder_says_what_it_graded_too(tmp_path, cheap_cli, capsys):
    """The lecturer, round 9 (problem 2): the class downloaded again into a new folder, `--regrade` one student:
    every notebook ran (a journal knows a file by its path) and the summary said "regraded 1 submission"."""
    import shutil

    klass, roster, log = _class(tmp_path, n=3)
    assert _run(tmp_path, klass, roster) == 0
    again = tmp_path / "downloaded-again"
    shutil.copytree(klass, again)
    capsys.readouterr()
    assert _run(tmp_path, again, roster, "--regrade", "s1") == 0
    err = capsys.readouterr().err
    assert "2 submissions in no row of the journal of --out were graded too, though not named in --regrade" in err
    assert "give the folder graded first" in err and "downloaded-again/s1.ipynb" not in err.split("--regrade:")[1]
