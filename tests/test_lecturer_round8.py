"""The lecturer, round 8 (a helper grading ten new students on Canvas and Moodle): what a student reads.

- Paths: a student's feedback named the lecturer's own folders ("duplicate: 81008 also handed in
  /tmp/lecturer8/work/canvas/..."): her files are named from the folder they share.
- Entities: "File &gt; Download" and "Restart &amp; Run All" where the file is read as plain text (a Canvas
  comment): only what could start HTML or an entity is escaped, and CommonMark still shows no tag of a student's.
(The draft handed in beside the final notebook: tests/test_grading_week.py; ``.pth`` weights not said as Python
files: tests/test_grading_attacks.py.)
"""

import base64
import copy
import html
from pathlib import Path

import pytest
from grading_class import sanitized
from grading_helpers import _row
from markdown_it import MarkdownIt

from bertfamily.grading import feedbackfiles, lms, policy
from bertfamily.grading.gradebook import student_bytes
from bertfamily.grading.textsafe import html_text, markdown_text, relative_names

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<http://evil.example>",
    "<!-- hidden -->",
    "</p><p>",
    "&lt;b&gt; &#60;b&#62; &#x3c;",
    "a < b > c && d <= e",
]


@pytest.mark.parametrize("text", HOSTILE + ["File > Download (or Save and Export Notebook As > Notebook)"])
def test_the_feedback_shows_html_as_text_and_reads_as_written(text):
    rendered = MarkdownIt("commonmark").render(html_text(text)).strip()
    inner = rendered.removeprefix("<p>").removesuffix("</p>")
    assert "<" not in inner and html.unescape(inner) == text, rendered


@pytest.mark.parametrize("text", HOSTILE + ["a&amp;b.ipynb", "R&D [x](y) *z*", "\\<script>"])
def test_a_title_reads_as_written_once_markdown_and_html_are_escaped(text):
    """A feedback title is escaped for Markdown, then for HTML (gradebook.feedback_markdown): an ``&amp;`` in a file
    name was shown as ``&amp;amp;``, and ``<img`` as ``&lt;img`` (the second escape escaped the first's)."""
    rendered = MarkdownIt("commonmark").renderInline(html_text(markdown_text(text)))
    assert "<" not in rendered and html.unescape(rendered) == text, rendered


def test_plain_words_stay_plain():
    for text in ("File > Download", "Kernel → Restart & Run All", "x >= 1 & y", "AT&T"):
        assert html_text(text) == text
    assert html_text("> a quote") == "&gt; a quote"  # at a line's start, > would quote


def test_one_students_files_are_named_from_the_folder_they_share():
    assert relative_names(["/tmp/l/canvas/a_1_ex.ipynb", "/tmp/l/canvas/a_1_ex_draft.ipynb"]) == {
        "/tmp/l/canvas/a_1_ex.ipynb": "a_1_ex.ipynb",
        "/tmp/l/canvas/a_1_ex_draft.ipynb": "a_1_ex_draft.ipynb",
    }
    assert relative_names(["/srv/week1/alice/ex.ipynb", "/srv/late/alice/ex.ipynb"]) == {
        "/srv/week1/alice/ex.ipynb": "week1/alice/ex.ipynb",
        "/srv/late/alice/ex.ipynb": "late/alice/ex.ipynb",
    }


def test_a_students_feedback_holds_none_of_the_lecturers_folders(exercise, tmp_path):
    names = [t.name for t in exercise.graded]
    folder = tmp_path / "lecturer" / "canvas"
    rows = [
        _row(str(folder / "adeyemi_81008_990008_exercise.ipynb"), dict.fromkeys(names, 1), student="81008"),
        _row(str(folder / "adeyemi_81008_990009_exercise_draft.ipynb"), dict.fromkeys(names, 0), student="81008"),
    ]
    for r in rows:
        r.submitted, r.time_from = "2026-11-27T20:00:00+00:00", "the file's modification time"
    rules = policy.load(exercise, due="2026-11-27T23:59:00+01:00")
    rows = policy.apply(rows, rules, exercise)
    rows[1].detail = "duplicate: 81008 also handed in " + relative_names(r.submission for r in rows)[rows[0].submission]
    for r in rows:
        text = student_bytes(feedbackfiles.feedback_text(r, exercise, rules)).decode("utf-8")
        assert str(tmp_path) not in text and "adeyemi_81008_990008_exercise.ipynb" in text, text


# ------------------------------------------------------------------ a zipped notebook (problem 2)


def _zipped(members: dict) -> bytes:
    import io
    import zipfile

    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return data.getvalue()


def test_the_one_notebook_of_a_zip_is_read_and_said(exercise):
    import nbformat

    from bertfamily.grading.submission import Invalid, read_submission

    text = nbformat.writes(exercise.reference)
    repairs = []
    zipped = _zipped({"__MACOSX/._exercise.ipynb": "x", "week 3/exercise.ipynb": text, "notes.txt": "hi"})
    nb = read_submission(zipped, exercise.tasks, exercise.name, repairs)
    assert [c.source for c in nb.cells] == [c.source for c in exercise.reference.cells]
    assert repairs == ["handed in as a .zip: its one notebook, 'week 3/exercise.ipynb', was graded"]
    for members, said in (
        ({"a.ipynb": text, "b.ipynb": text}, "a .zip holding 2 notebooks"),
        ({"notes.txt": "no notebook"}, "a .zip holding 0 notebooks"),
        ({"inner.ipynb": _zipped({"x.ipynb": text})}, "another .zip"),
    ):
        with pytest.raises(Invalid, match=said):
            read_submission(_zipped(members), exercise.tasks, exercise.name, [])
    with pytest.raises(Invalid, match="cannot be read"):
        read_submission(b"PK\x03\x04 not a zip at all", exercise.tasks, exercise.name, [])


def test_a_zip_is_read_to_the_cap_whatever_it_says(tmp_path):
    from bertfamily.grading.safeio import from_zip

    bomb = _zipped({"big.ipynb": "{" + " " * 200_000 + "}"})  # 200 kB that deflate to a few hundred bytes
    assert len(bomb) < 2_000
    with pytest.raises(ValueError, match="larger than"):
        from_zip(bomb, 100_000)


def test_a_zip_in_a_canvas_download_is_a_students_notebook(tmp_path):
    (tmp_path / "lindqvistsven_81010_990011_exercise_distilbert.zip").write_bytes(_zipped({"x.ipynb": "{}"}))
    (found,) = lms.find([tmp_path])
    assert (found.layout, found.key, found.notebook) == ("canvas", "81010", True)


def test_a_damaged_zip_is_one_invalid_row_not_a_stopped_class(exercise):
    """The re-check of round 8 (a third helper): a deflate or LZMA stream damaged in transit raised zlib's or
    lzma's error through the whole class (no gradebook); a zip of 600,000 entries took seconds to list."""
    import io
    import zipfile

    import nbformat

    from bertfamily.grading.safeio import MAX_ZIP_ENTRIES
    from bertfamily.grading.submission import Invalid, read_submission

    text = nbformat.writes(exercise.reference)
    for method in (zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2):
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w", method) as archive:
            archive.writestr("x.ipynb", text)
        damaged = bytearray(data.getvalue())
        for i in range(200, 260):  # inside the compressed stream, after the local header
            damaged[i] ^= 0x5A
        with pytest.raises(Invalid, match="cannot be read"):
            read_submission(bytes(damaged), exercise.tasks, exercise.name, [])
    many = _zipped({"x.ipynb": text, **{f"f{i}.txt": "" for i in range(MAX_ZIP_ENTRIES + 1)}})
    with pytest.raises(Invalid, match="more than 1,000 entries"):
        read_submission(many, exercise.tasks, exercise.name, [])


def test_a_webp_screenshot_is_not_read_either(exercise):
    from nbformat.v4 import new_markdown_cell

    from bertfamily.grading import literals
    from bertfamily.grading.budget import Budget

    nb = copy.deepcopy(exercise.reference)
    shot = new_markdown_cell("![shot.webp](attachment:shot.webp)")
    image = b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(range(256)) * 200
    shot["attachments"] = {"shot.webp": {"image/webp": base64.b64encode(image).decode()}}
    nb.cells.append(shot)
    assert literals.in_text_cells(nb, exercise, {42.0}, Budget(characters=20_000)) == []


def test_a_notebook_handed_in_without_outputs_is_said_once(exercise):
    """Problem 8: Chen's feedback said "not checked: handed in without outputs" once a task, nine times."""
    from bertfamily.grading.gradebook import feedback_markdown
    from bertfamily.grading.scoring import NOT_STORED

    names = [t.name for t in exercise.graded]
    row = _row("chen.ipynb", dict.fromkeys(names, 1), outputs="; ".join(f"{n}: {NOT_STORED}" for n in names))
    text = feedback_markdown(row, exercise)
    assert text.count("handed in without its outputs") == 1 and NOT_STORED not in text, text
    row.outputs = f"task1: {NOT_STORED}; task2: differs: cell 7: stored '1', re-run '2'"
    assert "task2: differs" in feedback_markdown(row, exercise)  # a difference is still said as it is


def test_a_zip_of_data_beside_the_notebook_is_a_data_file(tmp_path, exercise):
    """Since a zip may hold the notebook, it is graded; one that holds none, beside the student's notebook, is
    left out as a PDF beside it is (no invalid row telling an honest student to hand in her notebook), while a
    zip that is all a student handed in keeps its row and its reason."""
    from bertfamily.grading.pipeline import Row

    names = [t.name for t in exercise.graded]
    (tmp_path / "smithjane_1002_5002_exercise.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "smithjane_1002_5003_models.zip").write_bytes(_zipped({"fp32.pt": "weights"}))
    (tmp_path / "doejohn_1003_5004_exercise.zip").write_bytes(_zipped({"a.ipynb": "{}", "b.ipynb": "{}"}))
    found = lms.find([tmp_path])
    assert all(f.notebook for f in found)  # each graded: what a zip holds is known once it is read
    invalid = "a .zip holding {} notebooks: hand in the notebook itself (.ipynb), one"
    rows = {
        "smithjane_1002_5002_exercise.ipynb": _row("x", dict.fromkeys(names, 1)),
        "smithjane_1002_5003_models.zip": Row("x", "invalid", None, len(names), {}, invalid.format(0)),
        "doejohn_1003_5004_exercise.zip": Row("x", "invalid", None, len(names), {}, invalid.format(2)),
    }
    for f in found:
        rows[f.path.name].submission = f.display
    got = {Path(r.submission).name: r for r in lms.attribute(list(rows.values()), found, exercise, None)}
    jane, john = got.get("smithjane_1002_5002_exercise.ipynb"), got.get("doejohn_1003_5004_exercise.zip")
    assert sorted(got) == ["doejohn_1003_5004_exercise.zip", "smithjane_1002_5002_exercise.ipynb"], got
    assert jane.status == "graded", jane
    assert not jane.detail and john.status == "invalid" and john.detail.startswith(invalid.format(2)), john


def test_the_self_check_says_a_name_is_defined_further_down(monkeypatch, capsys):
    """The lecturer, round 8 (problem 10): a notebook that worked only run out of order (``to_mib`` defined in a
    later cell) got from the self-check command a NameError and no cause; the grader's feedback said the cause.
    The self-check says it now, in the feedback's words, once a name."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from bertfamily.grading import causes, cli

    def raised(source, name):
        cell = new_code_cell(source)
        cell.outputs = [new_output("error", ename="NameError", evalue=f"name '{name}' is not defined", traceback=[])]
        return cell

    nb = new_notebook(
        cells=[
            new_markdown_cell("# sizes"),
            raised("fp32_mib = to_mib(n)", "to_mib"),
            raised("print(to_mib(1))", "to_mib"),
            raised("print(never)", "never"),
            new_code_cell("def to_mib(n):\n    return n / 2**20"),
        ]
    )
    notes = causes.run_order_notes(nb)
    assert notes == [
        "cell 1: `to_mib` is defined further down, in cell 4: run from the top (Kernel → Restart & Run All), as the "
        "grader runs it, the notebook uses it before that cell has run"
    ]
    monkeypatch.setattr(causes, "execute_copy", lambda path, timeout: nb)
    assert cli.main(["self-check", "zoe.ipynb"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"note: {notes[0]}") and "(a self-check, not a grade)" in out, out


def test_the_courses_sanitize_rules_keep_ls_sizes_and_drop_what_changes_with_the_machine():
    """The lecturer, round 8 (problem 8): `!ls -l` in a student's notebook 'differed' on every re-run (its owner,
    links and time are the machine's), and a Colab student's `!pip install` printed pip's warning about root that
    the sandbox's run does not: under tests/sanitize.cfg both read the same, and a file's size still counts."""
    stored = (
        "total 327692\n-rw-r--r-- 1 root root 267967963 Dec  7 18:13 fp32.pt\n"
        "WARNING: Running pip as the 'root' user can result in broken permissions. Use the --root-user-action option\n"
    )
    rerun = "total 327688\n-rw-r--r-- 1 sandbox sandbox 267967963 Dec  8 09:24 fp32.pt\n"
    assert sanitized(stored) == sanitized(rerun) and "267967963" in sanitized(rerun), sanitized(stored)
    smaller = rerun.replace("267967963", "67967963")
    assert sanitized(smaller) != sanitized(stored)
    # the lecturer, round 9: `ls -lh` (the manual's example), and pip's warning in colour (on a notebook's pty)
    human = "total 320M\n-rw-r--r-- 1 root root 254M Dec  7 21:09 distilbert.pt\n"
    assert sanitized(human) == sanitized(human.replace("root root", "sandbox sandbox").replace("21:09", "21:35"))
    assert "254M" in sanitized(human) and sanitized(human) != sanitized(human.replace("254M", "64M"))
    coloured = (
        "\x1b[33mWARNING: Running pip as the 'root' user can result in broken permissions\x1b[0m\x1b[33m\r\n\x1b[0m"
    )
    assert sanitized("(transformers 5.25.0)\n" + coloured) == sanitized("(transformers 5.25.0)\n")


def test_what_the_grader_repaired_is_the_lecturers_not_the_students(exercise):
    """The lecturer, round 8 (problem 8): "a `transient` key in an output (2 times)" meant nothing to Mia, a VS
    Code user, and cost her nothing: the gradebook's detail keeps it; her feedback says what concerns her."""
    from bertfamily.grading.gradebook import feedback_markdown

    names = [t.name for t in exercise.graded]
    repaired = "repaired before grading (the notebook opens in Jupyter as it is): a `transient` key on a code cell"
    ids = "the notebook has no cell ids (saved by an older editor): 17 of the course's cells were recognised by code"
    row = _row("mia.ipynb", dict.fromkeys(names, 1))
    row.detail = f"{repaired}; {ids}"
    text = feedback_markdown(row, exercise)
    assert "transient" not in text and "repaired" not in text and "17 of the course's cells" in text, text
