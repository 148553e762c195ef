"""The third attacker's kinds, on the grader's own parts (fast: no kernel runs).

- one submission that stalls the class: a FIFO named like a notebook, a 1 TiB sparse file, a legal
  name too long once escaped, code that makes the typed-answer fixpoint quadratic or simply too much;
- writes outside the given folders: output folders inside the submissions, links in their paths, a
  link planted under a feedback file's name;
- text that reaches a terminal, a spreadsheet or a browser as code: control sequences, HTML, formulas;
- answers the grader cannot tell from work: numbers the checks expect at any depth of code, in text,
  in Markdown or metadata; code that reaches the exporter's namespace.

test_kernel_limits.py covers the limits the kernel holds.
"""

import ast
import csv
import os
import time

import nbformat
import pytest
from grading_class import EXERCISE, TINY, tiny

from bertfamily import grading
from bertfamily.grading import budget, integrity, literals, safeio, sandbox
from bertfamily.grading.canvas import write_canvas
from bertfamily.grading.classroom import collect
from bertfamily.grading.gradebook import summary, write_feedback, write_gradebook
from bertfamily.grading.pipeline import grade_submission
from bertfamily.grading.textsafe import CONTROL

HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\u202eevil\x9b<script>alert(1)</script>"


def graded(path, name="x.ipynb"):
    return grade_submission(path, name, tiny(), grading.Limits(), "")


# ------------------------------------------------------------------ one submission never stalls the class


def test_a_fifo_named_like_a_notebook_is_refused_without_blocking(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    os.mkfifo(klass / "aaron.ipynb")  # nobody ever writes into it: reading it would block forever
    ((path, shown),) = collect([klass])
    began = time.monotonic()
    row = graded(path, shown)
    assert time.monotonic() - began < 5
    assert row.status == "invalid" and "FIFO" in row.detail, row
    assert [p for p, _ in collect([klass / "aaron.ipynb"])] == [klass / "aaron.ipynb"]  # given alone: a row too


def test_a_sparse_terabyte_file_is_refused_by_its_size_before_it_is_read(tmp_path):
    huge = tmp_path / "huge.ipynb"
    with open(huge, "wb") as handle:
        handle.truncate(2**40)  # 1 TiB, no block on disk
    began = time.monotonic()
    row = graded(huge)
    assert time.monotonic() - began < 5
    assert row.status == "invalid" and "larger than 50 MiB (1,099,511,627,776 bytes)" in row.detail, row
    with pytest.raises(ValueError, match="symbolic link"):
        os.symlink(huge, tmp_path / "link.ipynb")
        safeio.read_regular(tmp_path / "link.ipynb", 2**20)


def test_a_long_latin1_name_runs_and_gets_its_feedback(tmp_path):
    """126 Latin-1 bytes are a legal name; escaped (``\\xe9``) they are 486 characters, longer than any
    file system allows: the kernel's copy and the feedback get a short name with a digest."""
    klass = tmp_path / "class"
    klass.mkdir()
    name = os.fsdecode(bytes([0xE9] * 120) + b".ipynb")
    (klass / name).write_bytes(TINY.read_bytes())
    ((path, shown),) = collect([klass])
    assert len(shown) > 255 and not CONTROL.search(shown)
    inside = sandbox._file_name(grading.submission.printable(path.name))
    assert len(inside.encode()) <= 255 and inside.endswith(".ipynb")
    (tmp_path / inside).write_bytes(b"{}")  # a name this file system takes
    rows = [grading.Row(shown, "graded", 4, 4, {}, "")]
    (written,) = write_feedback(rows, tiny(), tmp_path / "feedback")
    assert written.exists() and len(written.name.encode()) <= 255
    assert "\\\\xe9\\\\xe9" in written.read_text(encoding="utf-8")  # escaped once more for Markdown


def test_the_typed_answer_fixpoint_reads_a_chain_once():
    """``aN = aN-1`` for 3,000 names: each name's binding is read a bounded number of times (before:
    one pass per link, 4.5 million readings)."""
    n, calls = 3000, [0]
    source = "a0 = len(data)\n" + "".join(f"a{i} = a{i - 1}\n" for i in range(1, n))
    real = literals._constant

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    literals._constant = counted
    try:
        assert literals.literal_names([ast.parse(source)]) == set()
    finally:
        literals._constant = real
    assert calls[0] < 5 * n, calls[0]


def test_code_past_the_graders_budget_is_flagged_and_scored_from_the_run(monkeypatch):
    from grading_helpers import passed_run

    ex = grading.Exercise.load(EXERCISE)
    nb = grading.model_answer(ex.reference)
    nb.cells.append(nbformat.v4.new_code_cell("".join(f"a{i} = {i}\n" for i in range(3000))))
    prepared = grading.prepare(nb, ex)
    monkeypatch.setattr(budget, "READ_CHARACTERS", 10_000)
    score = grading.score_run(prepared, ex, passed_run(prepared, ex, {}), grading.Limits())
    assert any("not read by the grader: its code is more than 10,000 characters" in f for f in score.flags), score.flags
    monkeypatch.setattr(budget, "READ_CHARACTERS", 10**6)
    monkeypatch.setattr(budget, "READ_SECONDS", 0.0)
    score = grading.score_run(prepared, ex, passed_run(prepared, ex, {}), grading.Limits())
    assert any("passed 0 s" in f for f in score.flags), score.flags


# ------------------------------------------------------------------ nothing written outside the given folders


def test_an_output_folder_inside_the_submissions_or_through_a_link_is_refused(tmp_path, capsys):
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "a.ipynb").write_bytes(TINY.read_bytes())
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "elsewhere")
    for folder, said in (
        (klass / "feedback", "inside a folder of submissions"),
        (tmp_path / "via" / "feedback", "goes through a symbolic link"),
    ):
        code = grading.main(
            [str(klass), "--out", str(tmp_path / "g.csv"), "--feedback", str(folder), "--reference", str(TINY)]
        )
        assert code == 2 and said in capsys.readouterr().err
    code = grading.main([str(klass), "--out", str(klass / "g.csv"), "--reference", str(TINY)])
    assert code == 2 and "inside a folder of submissions" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere" / "feedback").exists() and not (klass / "g.csv").exists()


def test_a_link_planted_under_a_feedback_name_is_replaced_not_followed(tmp_path):
    target = tmp_path / "instructor.txt"
    target.write_text("the instructor's own file\n", encoding="utf-8")
    feedback = tmp_path / "feedback"
    feedback.mkdir()
    (feedback / "mallory.md").symlink_to(target)
    write_feedback([grading.Row("mallory.ipynb", "graded", 0, 4, {}, "")], tiny(), feedback)
    assert target.read_text(encoding="utf-8") == "the instructor's own file\n"
    assert not (feedback / "mallory.md").is_symlink() and "Feedback" in (feedback / "mallory.md").read_text()


# ------------------------------------------------------------------ no control byte, no HTML, no formula


def test_control_sequences_html_and_formulas_reach_no_output_as_code(tmp_path):
    ex = tiny()
    name = collect_name(tmp_path, "eve" + HOSTILE[:20].replace("/", "_") + ".ipynb")
    task = ex.graded[0].name
    rows = [
        grading.Row(
            name,
            "error",
            None,
            4,
            dict.fromkeys(t.name for t in ex.graded),
            f"{task}: {HOSTILE}; =HYPERLINK(\"http://x\")",
            flags="@SUM(1)",
            read_by_hand=HOSTILE,
            student=" =1+1",
            feedback={task: [f"✗ {HOSTILE}"]},
        )
    ]
    write_gradebook(rows, ex, tmp_path / "g.csv", roster=True)
    write_canvas(rows, {" =1+1": {"name": "-2+3"}}, "A (1)", tmp_path / "canvas.csv")
    (fb,) = write_feedback(rows, ex, tmp_path / "feedback")
    outputs = {
        "gradebook": (tmp_path / "g.csv").read_text(encoding="utf-8"),
        "canvas": (tmp_path / "canvas.csv").read_text(encoding="utf-8"),
        "feedback": fb.read_text(encoding="utf-8"),
        "summary": summary(rows, ex),
    }
    for where, text in outputs.items():
        assert not CONTROL.search(text.replace("\n", "").replace("\r", "")), (where, text)
        assert "<script>" not in text or where != "feedback", where
    assert "&lt;script>" in outputs["feedback"] and "\\x1b]52" in outputs["feedback"]
    for file in ("g.csv", "canvas.csv"):
        with open(tmp_path / file, encoding="utf-8", newline="") as handle:
            cells = [c for line in csv.reader(handle) for c in line]
        assert not [c for c in cells if c.lstrip()[:1] in ("=", "+", "-", "@")], cells


def collect_name(tmp_path, name: str) -> str:
    klass = tmp_path / "class"
    klass.mkdir(exist_ok=True)
    (klass / name).write_bytes(b"{}")
    ((_, shown),) = collect([klass / name])
    return shown


# ------------------------------------------------------------------ answers the grader cannot tell from work

EXPECTED = {66362880}


@pytest.mark.parametrize(
    "source",
    [
        "distilbert_count = 0 * len(workdir) + 66362880",
        "distilbert_count = int(str(len(w) * 0) + '66362880')",
        "open('size', 'wb').write(os.urandom(0 * n + (66362879 + 1)))",
        "x = f(['a', {'k': [1, 2, (3, 66_362_880)]}])",
    ],
)
def test_a_number_the_checks_expect_is_seen_at_any_depth_of_code_and_in_text(source):
    found = integrity._findings(ast.parse(source), {"os": "os"}, EXPECTED)
    assert any("66362880" in f for f in found), (source, found)


@pytest.mark.parametrize(
    "source, said",
    [
        ("import IPython.display as d\nvars(d)['publish_display_data'] = f", "uses vars"),
        ("b = (lambda: 0).__globals__['__builtins__']", "uses .__globals__"),
        ("g = getattr(f, '__glo' + 'bals__')", "computed name"),
        ("import pickle\npickle.loads(blob)", "imports pickle"),
    ],
)
def test_code_that_reaches_the_exporters_namespace_is_flagged(source, said):
    found = integrity._findings(ast.parse(source), {}, set())
    assert any(said in f for f in found), (source, found)


def test_numbers_kept_in_markdown_or_metadata_are_flagged_and_the_course_is_not():
    ex = grading.Exercise.load(EXERCISE)
    nb = grading.model_answer(ex.reference)
    assert integrity.in_text_cells(nb, ex, integrity._expected_values()) == []
    nb.cells.append(nbformat.v4.new_markdown_cell("My notes: DistilBERT has 66,362,880 parameters."))
    nb.cells[0].metadata["answer"] = "66362880"
    said = integrity.suspicious(nb, ex)
    assert any("(markdown) holds the number 66362880" in s for s in said), said
    assert any("cell 0 (" in s and "66362880" in s for s in said), said


# ------------------------------------------------------------------ a student never passes for another


def test_a_file_named_like_a_classmates_moodle_export_stays_its_senders(tmp_path):
    from bertfamily.grading import lms

    flat = tmp_path / "moodle"
    flat.mkdir()
    bob = "Bob Jones_333_assignsubmission_file_"
    (flat / f"{bob}exercise_distilbert.ipynb").write_text("{}")
    # Mallory uploads a file (or a folder) named like Bob's export; Moodle puts her own prefix in front
    (flat / f"Mallory Smith_222_assignsubmission_file_{bob}exercise.ipynb").write_text("{}")
    (flat / f"Eve Roe_444_assignsubmission_file_{bob}").mkdir()
    (flat / f"Eve Roe_444_assignsubmission_file_{bob}" / "x.ipynb").write_text("{}")
    (flat / "Ann Lee_555_assignsubmission_file_new\nline.ipynb").write_text("{}")  # still Ann's
    (flat / "leeann_666_1001_new\nline.ipynb").write_text("{}")  # Canvas: still this student's
    got = sorted((f.key, f.name) for f in lms.find([flat]))
    assert got == [
        ("222", "Mallory Smith"),
        ("333", "Bob Jones"),
        ("444", "Eve Roe"),
        ("555", "Ann Lee"),
        ("666", "leeann"),
    ], got


def test_a_name_with_a_newline_or_escape_is_the_same_row_for_the_grader_and_the_lms_reader(tmp_path):
    """The class's rows are made by collect() and matched to the LMS layout by lms.find(): one name
    shown two ways made a KeyError after the whole class had run (no gradebook, no feedback)."""
    from bertfamily.grading import lms

    klass = tmp_path / "class"
    klass.mkdir()
    for name in ("new\nline.ipynb", "tab\there.ipynb", "\x1b]0;t\x07x.ipynb", "\u202eevil.ipynb", "-rf --out=x.ipynb"):
        (klass / name).write_text("{}")
    os.mkdir(klass / "Jane Doe\r_5_assignsubmission_file_")
    (klass / "Jane Doe\r_5_assignsubmission_file_" / "a\nb.ipynb").write_text("{}")
    (klass / os.fsdecode(b"caf\xe9.ipynb")).write_text("{}")
    shown = sorted(d for _, d in collect([klass]))
    assert shown == sorted(f.display for f in lms.find([klass])), shown
    assert not [d for d in shown if CONTROL.search(d)], shown


def test_a_lone_surrogate_escaped_in_the_json_is_refused_with_its_reason(tmp_path):
    """``"\\udfff"`` in a notebook's JSON is valid JSON but no UTF-8 text: the sandbox's copy could not be
    written and the row said "the grader failed" (UnicodeEncodeError); now it says what is wrong."""
    import json

    nb = grading.model_answer(grading.Exercise.load(EXERCISE).reference)
    nb.cells.insert(3, nbformat.v4.new_markdown_cell("text \udfff"))
    path = tmp_path / "surrogate.ipynb"
    path.write_text(json.dumps(nb, ensure_ascii=True))
    began = time.monotonic()
    row = grade_submission(path, "surrogate.ipynb", grading.Exercise.load(EXERCISE), grading.Limits(), "")
    assert time.monotonic() - began < 30
    assert row.status == "invalid" and "lone surrogate ('\\udfff')" in row.detail, row


def test_a_moodle_name_holding_the_prefix_twice_is_said_on_the_row(tmp_path):
    """Moodle's prefix twice in one name: a full name a student set to carry a classmate's prefix
    (``Bob Jones_333_assignsubmission_file_``, folder ``..._222_assignsubmission_file_``) reads as Bob's,
    a file named so reads as its sender's; either way the row says so, for the instructor to check."""
    from grading_helpers import _row

    from bertfamily.grading import lms

    exercise = grading.Exercise.load(EXERCISE)
    export = tmp_path / "moodle"
    odd = "Bob Jones_333_assignsubmission_file__222_assignsubmission_file_"
    for folder in ("Bob Jones_333_assignsubmission_file_", odd):
        (export / folder).mkdir(parents=True)
        (export / folder / "exercise_distilbert.ipynb").write_text("{}")
    found = lms.find([export])
    names = [t.name for t in exercise.graded]
    for roster in (None, {"222": {"id": "222", "participant": "222"}, "333": {"id": "333", "participant": "333"}}):
        rows = lms.attribute([_row(f.display, dict.fromkeys(names, 1)) for f in found], found, exercise, roster)
        said = {r.submission.split("/")[-2]: r.flags for r in rows if r.submission}
        assert "prefix twice" in said[odd] and "read by hand" in said[odd], said
        assert "prefix twice" not in said["Bob Jones_333_assignsubmission_file_"], said
