"""The lecturer, round 11 (a helper in a lecturer's place, with notebooks and exports it wrote), and what the round
before left undone: each problem as a lecturer would meet it."""

import os
import subprocess
import sys

import nbformat
import pytest
from grading_class import EXERCISE, GRADED, added, grade_alone, sanitized, tiny, with_source
from grading_helpers import _row

from bertfamily import grading
from bertfamily.grading import policy
from bertfamily.grading.hub import write_served_hub
from bertfamily.grading.moodle import read_worksheet
from bertfamily.grading.standins import NO_SECRET, write_standins

SECRET = """
import os
from google.colab import userdata
from huggingface_hub import login
os.environ["HF_TOKEN"] = userdata.get("HF_TOKEN")
login(token=userdata.get("HF_TOKEN"))
numbers = list(range(10))
x = sum(numbers) - 3
note = "the sum of 0 to 9 is 45, less 3"
print(x)
"""


def test_colabs_secrets_give_a_placeholder_the_served_hub_ignores(tmp_path):
    """Round 10, left undone: ``userdata.get("HF_TOKEN")`` (Colab's secrets) raised ``No module named
    'google.colab.userdata'`` in a graded run. It returns a placeholder, which a load from the served hub
    accepts as a token and does not need."""
    folder = write_standins(tmp_path / "standins")
    write_served_hub(tmp_path / "hub")
    code = (
        "from google.colab import userdata\nimport google.colab\ntoken = userdata.get('HF_TOKEN')\n"
        "assert google.colab.userdata is userdata and issubclass(userdata.SecretNotFoundError, Exception)\n"
        "from transformers import AutoConfig\n"
        "config = AutoConfig.from_pretrained('bert-base-uncased', token=token)\n"
        "print(token, config.num_hidden_layers)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(folder), "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [NO_SECRET, "12"], done.stdout


@pytest.mark.sandbox
def test_a_colab_student_who_signs_in_to_the_hub_with_a_secret_in_a_tasks_cell_loses_nothing(tmp_path, monkeypatch):
    """The student stored ``HF_TOKEN`` in Colab's secrets, read it and signed in to the hub with it in task 1's cell
    (``login(token=...)``, which asks the hub over the network): full marks, the outputs reproduced, nothing
    flagged (before: the cell raised, and every task after it lost its marks)."""
    exercise = tiny()
    nb = with_source(grading.model_answer(exercise.reference), "s1", SECRET, output="42\n")
    row = grade_alone(nb, tmp_path, monkeypatch, "ines.ipynb")
    got = (row.status, row.score, row.max_score, row.outputs, row.flags)
    assert got == ("graded", GRADED, GRADED, "reproduced", ""), row


@pytest.mark.parametrize("reader", [grading.read_roster, read_worksheet])
def test_a_tab_separated_roster_says_what_to_do(tmp_path, reader):
    """Round 10's re-check, left undone: a roster saved as 'Text (Tab delimited)' (or pasted from a spreadsheet) got
    the generic "no id column" error; it is told as the ';' one is, naming the file."""
    tabs = tmp_path / "pasted.csv"
    tabs.write_text("Student\tID\tSIS User ID\tSIS Login ID\tSection\r\nBjörn Åkesson\t91002\t\t\tLab B\r\n")
    with pytest.raises(ValueError, match=r"pasted\.csv separates its columns with '\\t' \(saved as 'Text \(Tab"):
        reader(tabs)


def test_the_gradebook_row_says_when_an_extension_made_a_late_file_on_time():
    """Round 10, left undone: with an extension, Canvas's LATE was rightly not counted, but the gradebook's row read
    "Canvas marked it LATE" with an empty ``late`` column, and only the feedback said why. The row's ``time_from``
    now says the extension made it on time (once, however often the policy is applied); a late file without one is
    late, and a file on time has no such words."""
    exercise = grading.Exercise.load(EXERCISE)
    marks = {t.name: 1 for t in exercise.graded}
    rows = {
        name: _row(f"canvas/{name}_LATE_{sid}_90330{sid[-1]}_ex.ipynb", marks, student=sid)
        for name, sid in (("soren", "48205"), ("mia", "48206"))
    }
    for r in rows.values():
        r.submitted, r.time_from = "2026-11-29T10:00:00+00:00", "the file's modification time; Canvas marked it LATE"
    rows["ida"] = _row("canvas/ida_48207_903307_ex.ipynb", marks, student="48207")
    rows["ida"].submitted, rows["ida"].time_from = "2026-11-27T10:00:00+00:00", "the file's modification time"
    rules = policy.load(exercise, due="2026-11-27T23:59:00+01:00", extensions=["48205=2026-12-01T23:59:00+01:00"])
    once = policy.apply(list(rows.values()), rules, exercise)
    twice = policy.apply(once, rules, exercise)
    for applied in (once, twice):
        soren, mia, ida = (r for r in applied)
        assert soren.late == "" and soren.time_from == (
            "the file's modification time; Canvas marked it LATE; on time by the student's extension until "
            "2026-12-01T23:59:00+01:00"
        ), soren
        assert mia.late.startswith("late") and "extension" not in mia.time_from, mia
        assert ida.late == "" and ida.time_from == "the file's modification time", ida


def test_ls_of_folders_and_iso_times_read_the_same_on_any_machine():
    """Round 14's re-check, left undone: `!ls -l` of a folder (its size is the file system's: 4096 on ext4, 60 on
    tmpfs) and `ls -l --time-style=long-iso` (or full-iso) 'differed' on every re-run; a file's size still counts."""
    stored = (
        "drwxr-xr-x 2 root root 4096 Dec  7 18:13 models\n"
        "-rw-r--r-- 1 root root 267967963 2026-12-07 18:13 fp32.pt\n"
        "-rw-r--r-- 1 root root 1024 2026-12-07 18:13:01.123456789 +0100 notes.txt\n"
    )
    rerun = (
        "drwxr-xr-x 3 sandbox sandbox 60 Dec  8 09:24 models\n"
        "-rw-r--r-- 1 sandbox sandbox 267967963 2026-12-08 09:24 fp32.pt\n"
        "-rw-r--r-- 1 sandbox sandbox 1024 2026-12-08 09:24:55.000000001 +0000 notes.txt\n"
    )
    assert sanitized(stored) == sanitized(rerun), (sanitized(stored), sanitized(rerun))
    assert "267967963" in sanitized(rerun) and "SIZE" in sanitized(rerun)
    assert sanitized(rerun.replace("267967963", "67967963")) != sanitized(stored)  # a file's size still counts


def test_canvass_export_with_a_manual_posting_row_is_read_as_it_comes(tmp_path):
    """Lecturer 11, problem 1 (MEDIUM): Canvas writes a row under the header where an assignment posts its grades by
    hand ("Manual Posting" in its column); the roster was refused ("line 2: no id") before anything was graded. It is
    skipped as the "Points Possible" row is, and the points are still read."""
    from bertfamily.grading.canvas import canvas_points

    export = tmp_path / "canvas_export.csv"
    export.write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,DistilBERT exercise (1234),Current Score\r\n"
        ",,,,,Manual Posting,\r\n"
        "    Points Possible,,,,,12.00,(read only)\r\n"
        '"Okafor, Nora",2001,S2001,nokafor,NLP 2026,,80.00\r\n',
        encoding="utf-8-sig",
    )
    assert list(grading.read_roster(export)) == ["2001"]
    assert canvas_points(export, "DistilBERT exercise (1234)") == 12.0


PLATFORM_FOLDERS = """
from google.colab import drive
drive.mount("/content/drive")
with open("/content/drive/MyDrive/data.bin", "wb") as handle:  # Colab, Drive mounted
    handle.write(bytes(range(256)) * 48)
path = "/kaggle/working/data.bin"  # Kaggle's working folder
with open(path, "wb") as handle:
    handle.write(bytes(range(256)) * 48)
with open("/content/data.bin", "wb") as handle:  # Colab's working folder, no Drive
    handle.write(bytes(range(256)) * 48)
size_bytes = os.path.getsize("/content/data.bin")
print(f"{size_bytes:,} bytes")
"""


@pytest.mark.sandbox
def test_files_saved_where_colab_and_kaggle_keep_them_cost_nothing(tmp_path, monkeypatch):
    """Lecturer 11, problems 2 and 6 (HIGH): Omar saved his models into Kaggle's /kaggle/working, Lena into Colab's
    /content, each as the platform shows; in the sandbox neither folder existed ("Parent directory /content does not
    exist") and tasks 6, 7, 9 and 10 were lost (8 of 12 for honest work). Both folders are in each sandbox, empty and
    writable (on its disk, the sizes recorded), and Drive's stand-in has an empty MyDrive: full marks."""
    exercise = tiny()
    nb = with_source(
        grading.model_answer(exercise.reference),
        "s2",
        PLATFORM_FOLDERS,
        output="Mounted at /content/drive\n12,288 bytes\n",
    )
    row = grade_alone(nb, tmp_path, monkeypatch, "omar.ipynb")
    got = (row.status, row.score, row.max_score, row.outputs, row.flags)
    assert got == ("graded", GRADED, GRADED, "reproduced", ""), row


def test_a_worksheet_in_german_says_to_download_it_in_english(tmp_path):
    """Lecturer 11, problem 4 (MEDIUM): a worksheet a German Moodle wrote (ID, Vollständiger Name, Bewertung, ...) was
    refused with advice about the assignment's feedback types, which were right; the manual said it would be refused
    at its first date. The error names its columns and says to switch Moodle's language to English."""
    sheet = tmp_path / "worksheet_de.csv"
    sheet.write_text(
        "ID,Vollständiger Name,E-Mail-Adresse,Status,Bewertung\r\nTeilnehmer/in 501,Ana Berg,a@x,Keine Abgabe,\r\n",
        encoding="utf-8-sig",
    )
    with pytest.raises(
        ValueError,
        match=r"not Moodle's grading worksheet in English.*'ID', 'Vollständiger Name'.*"
        r"switch your language to English",
    ):
        read_worksheet(sheet)


def test_a_notebook_resaved_by_jupytext_is_not_said_to_have_no_cell_ids():
    """Lecturer 11, problem 3 (LOW): jupytext re-saved Tom's notebook with new cell ids; its row said it had no cell
    ids (saved by an older editor). It says the ids are not the handout's; a notebook without ids is still told so."""
    import copy

    from bertfamily.grading.submission import prepare

    exercise = tiny()
    nb = grading.model_answer(exercise.reference)
    resaved, bare = copy.deepcopy(nb), copy.deepcopy(nb)
    for n, c in enumerate(resaved.cells):
        c["id"] = f"jt{n:06d}"
    for c in bare.cells:
        c.pop("id", None)
    said = {
        name: "; ".join(n for _, n in prepare(x, exercise).notes) for name, x in (("resaved", resaved), ("bare", bare))
    }
    assert "its cell ids are not the handout's (re-saved by jupytext or another tool)" in said["resaved"], said
    assert "the notebook has no cell ids (saved by an older editor)" in said["bare"], said


def test_the_gradebook_is_written_with_the_umasks_mode_or_the_one_it_had(tmp_path):
    """Lecturer 11, problem 7 (LOW): the gradebook, Canvas's and Moodle's files were 0600 whatever the umask (a
    temporary file renamed), and a lecturer's chmod g+r was undone by each --force. A new file gets the umask's mode;
    a file written over keeps its own."""
    from bertfamily.grading.gradebook import write_csv_atomically

    out = tmp_path / "gradebook.csv"
    old = os.umask(0o027)
    try:
        write_csv_atomically(out, [["a", "b"]], force=False)
        assert oct(out.stat().st_mode & 0o777) == oct(0o640)
        out.chmod(0o664)
        write_csv_atomically(out, [["a", "c"]], force=True)
        assert oct(out.stat().st_mode & 0o777) == oct(0o664) and out.read_bytes() == b"a,c\r\n"
    finally:
        os.umask(old)


def test_the_handout_given_as_the_reference_is_told_so(tmp_path):
    """Lecturer 11, problem 9 (LOW): the handout (or a student's notebook) given as --reference stopped with "code cell
    ... is tagged ['check'] before any {exercise} directive"; it says it is a student version and which to give."""
    from bertfamily.grading.student import student_version

    handout = tmp_path / "handout.ipynb"
    nbformat.write(student_version(grading.Exercise.load(EXERCISE).reference), handout)
    with pytest.raises(ValueError, match=r"handout\.ipynb is a student version .*give the solution notebook"):
        grading.Exercise.load(handout)


@pytest.mark.sandbox
def test_a_kept_restart_the_runtime_cell_is_named_in_the_students_feedback(tmp_path, monkeypatch):
    """Lecturer 11, problem 10 (MEDIUM): Eli's Colab notebook kept the cell that restarts the runtime after a pip
    install (``os.kill(os.getpid(), 9)``); run from the top, the kernel dies there. The row is still an error (the
    notebook does not run from the top), but the student's feedback now says that the cell stops its own kernel and
    what to do, not only "the kernel died"."""
    from bertfamily.grading.gradebook import feedback_markdown

    exercise = tiny()
    nb = added(grading.model_answer(exercise.reference), "!pip install -q x\nimport os\nos.kill(os.getpid(), 9)", 1)
    row = grade_alone(nb, tmp_path, monkeypatch, "eli.ipynb")
    assert row.status == "error" and "the kernel died (in cell" in row.detail, row
    said = feedback_markdown(row, exercise)
    assert "the cell stops its own kernel (as Colab's restart-the-runtime line" in said, said


def test_a_blackboard_download_is_read_as_blackboard_names_it(tmp_path):
    """Lecturer 11, problem 8 (MEDIUM): Blackboard Learn's download (ASSIGNMENT_USERNAME_attempt_TIME_FILE, a .txt
    receipt beside each attempt) was read as one student named by the assignment's first word, every student
    missing; with --pattern, each file was late by the time it was copied. The user name is the student, the time
    in the name is when it was handed in (in the deadline's zone), the receipt is no submission."""
    import os
    from datetime import timezone

    from bertfamily.grading import lms

    folder = tmp_path / "bb"
    folder.mkdir()
    for name in (
        "DistilBERT Exercise_ana_attempt_2026-12-04-21-15-02_tiny.ipynb",
        "DistilBERT Exercise_ana_attempt_2026-12-04-21-15-02.txt",
        "DistilBERT Exercise_bo_attempt_2026-12-06-02-30-11_exercise.ipynb",
    ):
        (folder / name).write_text("{}", encoding="utf-8")
        os.utime(folder / name, (1.8e9, 1.8e9))  # copied much later: the file times say nothing
    (tmp_path / "roster.csv").write_text("id,name\nana,Ana\nbo,Bo\ncy,Cy\n", encoding="utf-8")
    roster = grading.read_roster(tmp_path / "roster.csv")
    exercise = tiny()
    names = [t.name for t in exercise.graded]
    found = lms.find([folder])
    rows = lms.attribute(
        [_row(f.display, dict.fromkeys(names, 1)) for f in found], found, exercise, roster, tz=timezone.utc
    )
    whose = {r.student: (r.status, r.submitted) for r in rows}
    assert whose == {
        "ana": ("graded", "2026-12-04T21:15:02+00:00"),
        "bo": ("graded", "2026-12-06T02:30:11+00:00"),
        "cy": ("missing", ""),
    }, whose
    rules = policy.load(exercise, due="2026-12-04T23:59:00+00:00")
    late = {r.student: r.late for r in policy.apply(rows, rules, exercise)}
    assert late["ana"] == "" and late["bo"] == "late by 1 d 2 h 31 min", late


def test_a_grading_files_keys_in_the_wrong_place_are_told(tmp_path):
    """Lecturer 11, problem 11 (LOW): late = "refuse" with penalty_percent_per_day = 10 was accepted and the
    percentage silently unused; late = "penalty" under [points] was told as "no task late"."""
    exercise = tiny()
    unused = tmp_path / "unused.toml"
    unused.write_text('[deadline]\ndue = 2026-03-01T23:59:00+01:00\nlate = "refuse"\npenalty_percent_per_day = 10\n')
    with pytest.raises(
        ValueError, match=r'penalty_percent_per_day counts only with late = "penalty" \(here late = "refuse"\)'
    ):
        policy.load(exercise, unused)
    policy.load(exercise, unused, late="penalty")  # the option decides: the file's percentage applies
    misplaced = tmp_path / "misplaced.toml"
    misplaced.write_text('[points]\ntask1 = 2\nlate = "penalty"\n')
    with pytest.raises(ValueError, match=r"late belongs under \[deadline\], not \[points\]"):
        policy.load(exercise, misplaced)
