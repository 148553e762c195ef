"""Round 13 of the red team (a helper attacking the grader with notebooks and names it wrote): a file a student
named like a classmate's Canvas or Moodle export, inside her own folder, was filed under the classmate (G1), and a
file named like Canvas's export outside a Canvas download escaped the deadline (G2)."""

from grading_helpers import _row, touch

from bertfamily.grading import lms, policy
from bertfamily.grading.lateness import CANVAS_ON_TIME

PLANTED = (
    "bob_1_2_exercise.ipynb",  # Canvas's name
    "Alice Liddell_444_assignsubmission_file_exercise.ipynb",  # Moodle's, flat
    "Bob Jones_222_assignsubmission_file_/exercise.ipynb",  # Moodle's folder
    "bob_1_2_x.zip",
)


def test_a_file_named_like_a_classmates_export_in_her_own_folder_is_hers_and_flagged(tmp_path):
    klass = tmp_path / "class"
    for student in ("alice", "bob", "mallory"):
        touch(klass / student / "exercise.ipynb")
    for name in PLANTED:
        touch(klass / "mallory" / name)
    touch(klass / "sacrificed" / "bob_1_2_exercise.ipynb")  # no notebook of her own beside it
    touch(klass / "bob" / "bob_1_2_exercise.ipynb")  # his own Canvas file, handed in again: his, no doubt
    found = {str(f.path.relative_to(klass)): f for f in lms.find([klass])}
    assert {f.key for f in found.values()} == {"alice", "bob", "mallory", "sacrificed"}
    assert {f.layout for f in found.values()} == {"folder"}
    for name in PLANTED:
        doubt = found[f"mallory/{name}"].doubt
        assert doubt.startswith("read by hand:") and "counts as 'mallory''s" in doubt, (name, doubt)
    assert "named like an LMS's export of another student (bob, 1)" in found["sacrificed/bob_1_2_exercise.ipynb"].doubt
    assert not found["mallory/exercise.ipynb"].doubt and not found["bob/bob_1_2_exercise.ipynb"].doubt


def test_an_lms_download_unzipped_into_a_folder_is_still_read_as_the_lms_names_it(tmp_path):
    """No top folder holds a notebook of a name no LMS gave: the folders are the downloads themselves."""
    moodle, canvas = tmp_path / "moodle", tmp_path / "canvas"
    touch(moodle / "download" / "Alice Liddell_444_assignsubmission_file_" / "exercise.ipynb")
    touch(moodle / "download" / "Bob Jones_222_assignsubmission_file_" / "exercise.ipynb")
    touch(canvas / "batch1" / "alice_11_2_exercise.ipynb")
    touch(canvas / "batch2" / "bob_12_3_exercise.ipynb")
    assert [(f.layout, f.key) for f in lms.find([moodle])] == [("moodle", "444"), ("moodle", "222")]
    found = lms.find([canvas])
    assert [(f.layout, f.key, f.verdict) for f in found] == [("canvas", "11", True), ("canvas", "12", True)]
    assert CANVAS_ON_TIME in lms.submitted(found[0], {}, None)[1]


def test_a_file_named_like_canvass_export_outside_a_canvas_download_is_late_by_its_time(tmp_path, exercise):
    """G2: `erin_1_2_exercise.ipynb` among plain names was 'Canvas did not mark it late': 3 days late under
    `--late refuse` it scored in full while her classmates of the same lateness scored 0."""
    klass = tmp_path / "class"
    for path in ("carol/exercise.ipynb", "frank.ipynb", "dave/dave_1_2_exercise.ipynb", "erin_1_2_exercise.ipynb"):
        touch(klass / path)
    found = lms.find([klass])
    names = [t.name for t in exercise.graded]
    rows = lms.attribute([_row(f.display, dict.fromkeys(names, 1)) for f in found], found, exercise, None)
    rules = policy.load(exercise, due="2026-12-02T00:00+00:00", late="refuse")
    graded = {r.submission.rsplit("/", 1)[-1]: r for r in policy.apply(rows, rules, exercise)}
    assert len(graded) == 4 and all(r.late and r.score == 0 for r in graded.values()), graded
    assert CANVAS_ON_TIME not in graded["erin_1_2_exercise.ipynb"].time_from


def test_no_backslash_or_backtick_opens_a_link_or_an_image_in_a_feedback_item():
    """F1: `` \\`[text](https://evil.example)` `` in a student's note or error message was, to the grader, a code
    span (kept as written) and, to a Markdown renderer, a backtick and a live link; ``\\[a](url)`` became an
    escaped backslash and a link. Every mix of backslashes, backticks and brackets renders no link and no image."""
    import itertools
    import random

    from markdown_it import MarkdownIt

    from bertfamily.grading.textsafe import html_text, markdown_item

    md = MarkdownIt("commonmark")
    pieces = ["\\", "`", "``", "[", "]", "(", ")", "!", "a", " ", "[t](https://evil.example)", "![](https://e.x/p.png)"]
    texts = ["".join(p) for p in itertools.product(pieces, repeat=3)]
    draw = random.Random(13)
    texts += ["".join(draw.choice(pieces) for _ in range(draw.randint(4, 14))) for _ in range(3000)]
    for text in texts:
        rendered = md.renderInline(html_text(markdown_item(text)))
        assert "<a " not in rendered and "<img" not in rendered, (text, rendered)
    kept = "cell 3 (the cell that starts `x = y[0]`) raised"  # a code span's brackets stay as written
    assert markdown_item(kept) == kept


def _roster(tmp_path, text):
    from bertfamily import grading

    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return grading.read_roster(path)


def test_a_folder_named_for_its_student_decides_whatever_the_files_names_say(tmp_path, exercise):
    """The re-check of round 13: with folders that are no roster ids (`jupyter-bob/`, `Mallory/`), the student
    was read from the file's name: `jupyter-mallory/bob_exercise.ipynb` counted as Bob's. The one roster id a
    folder's name holds is its student."""
    klass = tmp_path / "class"
    for path in ("jupyter-alice/exercise.ipynb", "jupyter-bob/exercise.ipynb", "Mallory/exercise.ipynb"):
        touch(klass / path)
    touch(klass / "Mallory" / "bob_exercise.ipynb")
    touch(klass / "week1" / "alice_extra.ipynb")  # a folder of no student: the file's name says whose, but...
    touch(klass / "week2" / "carol_exercise.ipynb")  # carol has no folder of her own: hers
    roster = _roster(tmp_path, "id,name\nalice,A\nbob,B\nmallory,M\ncarol,C\n")
    found = lms.find([klass])
    names = [t.name for t in exercise.graded]
    rows = lms.attribute([_row(f.display, dict.fromkeys(names, 1)) for f in found], found, exercise, roster)
    whose = {r.submission.split("class/")[1]: r.student for r in rows if r.submission}
    assert whose == {
        "Mallory/bob_exercise.ipynb": "mallory",
        "Mallory/exercise.ipynb": "mallory",
        "jupyter-alice/exercise.ipynb": "alice",
        "jupyter-bob/exercise.ipynb": "bob",
        "week1/alice_extra.ipynb": "",  # ... alice has a folder of her own: read by hand (red team round 15)
        "week2/carol_exercise.ipynb": "carol",
    }, whose
    (extra,) = [r for r in rows if r.submission.endswith("week1/alice_extra.ipynb")]
    assert extra.flags.startswith("read by hand: alice's by its name, in the folder 'week1'"), extra.flags


def test_an_lms_download_in_a_folder_beside_a_notebook_of_the_lecturer_is_still_the_lms(tmp_path):
    """The re-check: one plain notebook in the wrapper folder made the whole download one student's."""
    klass = tmp_path / "class"
    touch(klass / "download" / "Alice Liddell_444_assignsubmission_file_" / "exercise.ipynb")
    touch(klass / "download" / "Bob Jones_222_assignsubmission_file_" / "exercise.ipynb")
    touch(klass / "download" / "instructions.ipynb")
    layouts = {f.path.name if f.layout == "folder" else f.key: f.layout for f in lms.find([klass])}
    assert layouts == {"444": "moodle", "222": "moodle", "instructions.ipynb": "folder"}, layouts


def test_made_up_canvas_names_make_no_majority_and_a_moodle_class_takes_no_canvas_verdict(tmp_path, exercise):
    """The re-check: a late student's two files named with made-up Canvas user ids won the count of Canvas names,
    and with it 'Canvas did not mark it late'; so did a Canvas-named file in a Moodle class."""
    klass = tmp_path / "class"
    for path in ("carol.ipynb", "frank.ipynb", "erin_901_2_exercise.ipynb", "erin_902_3_exercise.ipynb"):
        touch(klass / path)
    touch(klass / "erin_903_4_x.ipynb")
    roster = _roster(tmp_path, "id,name,canvas_id\ncarol,C,1\nfrank,F,2\nerin,E,3\n")
    found = lms.find([klass])
    names = [t.name for t in exercise.graded]
    rows = lms.attribute([_row(f.display, dict.fromkeys(names, 1)) for f in found], found, exercise, roster)
    assert not [r.submission for r in rows if CANVAS_ON_TIME in (r.time_from or "")], rows
    moodle = tmp_path / "moodle"
    for who in ("Alice Liddell_444", "Bob Jones_222"):
        touch(moodle / f"{who}_assignsubmission_file_" / "exercise.ipynb")
    touch(moodle / "erin_3_9_exercise.ipynb")
    assert [f.verdict for f in lms.find([moodle]) if f.layout == "canvas"] == [False]


def test_moodles_feedback_zip_follows_the_gradebooks_student(tmp_path, exercise):
    """The re-check: the gradebook gave Mallory the file in her own folder named like Bob's Moodle folder, and
    Moodle's feedback zip still put her feedback in Bob's folder."""
    from bertfamily.grading import feedbackfiles

    names = [t.name for t in exercise.graded]
    hers = _row(str(tmp_path / "class" / "mallory" / "Bob Jones_555_assignsubmission_file_" / "x.ipynb"), {})
    bobs = _row(str(tmp_path / "moodle" / "Bob Jones_555_assignsubmission_file_" / "ex.ipynb"), {})
    for r, student in ((hers, "mallory"), (bobs, "555")):
        r.student, r.tasks = student, dict.fromkeys(names, 1)
    _, bundle, said = feedbackfiles.write_all([hers], exercise, tmp_path / "feedback")
    assert bundle is None and said == []
    _, bundle, _ = feedbackfiles.write_all([hers, bobs], exercise, tmp_path / "both")
    import zipfile

    with zipfile.ZipFile(bundle) as archive:
        assert archive.namelist() == ["Bob Jones_555_assignsubmission_file_/555.md"]


def test_an_emailed_file_named_like_canvass_in_a_folder_of_its_own_is_late_by_its_time(tmp_path, exercise):
    """The re-check: a late file e-mailed to the lecturer, named by the student with her true Canvas user id and
    graded from a folder of its own beside the Canvas download, was 'Canvas did not mark it late'. Canvas's verdict
    is read per folder given, and one file of one student is no download."""
    canvas, late = tmp_path / "canvas", tmp_path / "late"
    for name in ("smithalice_111_1_exercise.ipynb", "jonesbob_222_2_exercise.ipynb"):
        touch(canvas / name)
    touch(late / "smithmallory_333_9_exercise.ipynb")
    roster = _roster(tmp_path, "id,name,canvas_id\nalice,A,111\nbob,B,222\nmallory,M,333\n")
    found = lms.find([canvas, late])
    names = [t.name for t in exercise.graded]
    rows = lms.attribute([_row(f.display, dict.fromkeys(names, 1)) for f in found], found, exercise, roster)
    on_time = sorted(r.student for r in rows if CANVAS_ON_TIME in (r.time_from or ""))
    assert on_time == ["alice", "bob"], on_time
    files = lms.find(sorted(canvas.glob("*.ipynb")))  # the download's files given one by one: one download still
    assert [f.verdict for f in files] == [True, True]
