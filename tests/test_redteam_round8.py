"""Round 8 of the red team (a helper attacking the sealed grader with the course's real exercise, its third
visit): three ways a submission with no work in it reached full marks with no flag, one way it made the
grader's own process build gigabytes, and text that reached a spreadsheet, a terminal or the feedback as
more than text. Each safe behaviour is asserted on the grader's readers and writers (fast: no kernel runs).

- ``json.dumps`` or ``io.open_code`` (through which the exporter line reads its own file) replaced through
  a function's parameter: only IPython's display attributes were said whatever held them;
- a cell that read the notebook's own stored outputs (the kernel saw its file as handed in) and printed
  them back: the answers of a friend's run, no number typed anywhere;
- an answers message naming hundreds of names its check never reads, each rebuilt as a stand-in in the
  grader's own process (2.6 GB from 16 KB);
- a ``;`` in a CSV cell (Excel splits there where the list separator is ``;``: ``a;=1+1`` became a
  formula), a Markdown link in a file name in the feedback's title, and invisible characters (tags,
  Hangul fillers) that made ``bob<tag>.ipynb`` look like ``bob.ipynb``.
"""

import csv
import json

import nbformat
import pytest
from grading_class import EXERCISE
from grading_helpers import with_cell

from bertfamily import grading
from bertfamily.grading import channel, gradebook, integrity, pipeline, verify
from bertfamily.grading.textsafe import display_name, escape_controls, markdown_text


@pytest.mark.parametrize(
    "source, attribute",
    [
        ("import json\ndef install(m, f):\n    m.dumps = f\ninstall(json, lambda *a, **k: '{}')", "dumps"),
        ("import io\ndef install(m, f):\n    m.open_code = f\ninstall(io, lambda p: io.BytesIO(b''))", "open_code"),
        ("import json\nmod, _ = json, 1\nmod.JSONEncoder.encode = lambda self, o: '{}'", "encode"),
        ("import runpy\nwith __import__('contextlib').nullcontext(runpy) as r:\n    r.run_path = print", "run_path"),
        ("import os\ndef fake(p): return 66362880\ndef put(m): m.getsize = fake\nput(os.path)", "getsize"),
    ],
)
def test_what_the_exporter_runs_through_replaced_through_a_parameter_is_said(exercise, source, attribute):
    nb = with_cell(grading.student_version(exercise.reference), source)
    said = " ".join(integrity.suspicious(nb, exercise))
    assert f".{attribute}" in said and ("replaces" in said or "uses" in said), said


def test_the_reference_and_honest_attribute_stores_are_not_said(exercise):
    assert integrity.suspicious(exercise.reference, exercise) == []
    honest = (
        "from transformers import AutoModel\nmodel = AutoModel.from_config(None)\n"
        "model.config.output_hidden_states = True\nmodel.training = False\nstats = {}\nstats['size'] = 3\n"
        "class Args:\n    pass\nargs = Args()\nargs.type, args.default, args.id = 'x', 1, 2\n"
        "tok = model\ntok.decoder = None\ntok.encoder = None"
    )
    nb = with_cell(grading.student_version(exercise.reference), honest)
    assert integrity.suspicious(nb, exercise) == []


def test_the_kernel_reads_its_notebook_without_the_stored_outputs(exercise, monkeypatch):
    """The file the kernel sees as its own holds the cells as handed in, and no output to print back."""
    nb = nbformat.read(EXERCISE, as_version=4)
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
    bare = nbformat.reads(pipeline.without_outputs(nb).decode("utf-8"), as_version=4)
    assert [c.source for c in bare.cells] == [c.source for c in nb.cells]
    assert all(c.outputs == [] and c.execution_count is None for c in bare.cells if c.cell_type == "code")
    assert all("attachments" not in c for c in bare.cells)
    seen = {}

    def run(prepared_nb, limits, sanitize, exports, submitted, name, hidden=None):
        seen["submitted"] = submitted
        raise RuntimeError("stop here: what reaches the sandbox is what this test reads")

    monkeypatch.setattr(pipeline, "run_sandboxed", run)
    row = pipeline.grade_submission(EXERCISE, "alice.ipynb", exercise, grading.Limits(), "")
    assert row.status == "error" and "stop here" in row.detail
    handed = nbformat.reads(seen["submitted"].decode("utf-8"), as_version=4)
    assert not any(c.get("outputs") for c in handed.cells if c.cell_type == "code")


def test_an_answers_message_names_only_what_its_check_reads(exercise):
    cid, source = next((cid, s) for t in exercise.graded for cid, s in t.checks)
    names = channel.read_names(source)
    honest = {n: {"plain": 1} for n in names}
    bomb = {**honest, **{f"x{i}": {"tensor": [1048576], "item": 1, "floating": False} for i in range(300)}}

    def outputs(answers):
        message = {"cell": cid, "answers": json.dumps(answers)}
        return [{"output_type": "display_data", "data": {channel.ANSWERS_MIME: message}, "metadata": {}}]

    assert channel.answers_of(cid, outputs(honest), names) == (honest, "")
    answers, why = channel.answers_of(cid, outputs(bomb), names)
    assert answers is None and "forged" in why and "x0" in why and "297 more" in why, why


def test_a_model_summary_past_a_thousand_layers_is_not_rebuilt():
    summary = {"module": "BertModel", "object": 1, "config": None, "values": 0, "linear": 5_000, "dynamic": []}
    with pytest.raises(ValueError, match="not an answer|more than the grader rebuilds"):
        verify.stand_in(summary, {})
    assert verify.MAX_LAYERS == 1_000


def test_a_semicolon_keeps_a_csv_cell_one_text_cell(tmp_path):
    out = tmp_path / "gradebook.csv"
    gradebook.write_csv_atomically(
        out, [["submission", "score", "detail"], ["class/e1;=1+1;.ipynb", 9, "task7: fp32;=HYPERLINK(\"x\");"]], False
    )
    text = out.read_text(encoding="utf-8")
    for delimiter in (",", ";"):  # as Excel reads it where the list separator is a comma, or a semicolon
        rows = list(csv.reader(text.splitlines(), delimiter=delimiter))
        cells = [c for r in rows for c in r]
        assert not any(c.lstrip().startswith(("=", "+", "-", "@")) for c in cells), cells
    assert list(csv.reader(text.splitlines()))[1] == ["class/e1;'=1+1;.ipynb", "9", "task7: fp32;'=HYPERLINK(\"x\");"]


def test_invisible_characters_are_escaped():
    assert display_name("bob\U000e0020.ipynb") == "bob\\U000e0020.ipynb"
    for char in ("\u180e", "\u3164", "\u115f", "\uffa0", "\u034f", "\ufe0f", "\u00ad", "\U000e0001"):
        assert char not in escape_controls(f"a{char}b"), repr(char)
    assert escape_controls("Müller-Lüdenscheidt, 日本, Ω") == "Müller-Lüdenscheidt, 日本, Ω"


def test_a_file_name_in_the_feedback_title_is_text(exercise, tmp_path):
    name = "n1_![t](https:evil.example)[appeal](https:evil.example).ipynb"
    assert markdown_text(name).count("\\[") == 2 and "](" not in markdown_text(name)
    row = gradebook.Row(name, "invalid", None, len(exercise.graded), {}, "not a notebook")
    text = gradebook.feedback_markdown(row, exercise)
    title = text.splitlines()[0]
    assert title.startswith("# Feedback: ") and "](" not in title and "![" not in title, title


@pytest.mark.parametrize(
    "name",
    [
        "jane_doe_48207_903306_exercise_distilbert.ipynb",  # Canvas's download name: kept as it reads
        "exercise (1).ipynb",
        "1. <http://a.b> __init__ _x_ *y* <img src=x onerror=alert(1)> &amp; a\\b `c` ~~s~~ |t| #1.ipynb",
        "é_ü_日_本 a___b snake_ _lead.ipynb",
    ],
)
def test_a_feedback_title_renders_as_the_file_name_and_nothing_else(name):
    """CommonMark (markdown-it, as GitHub and Jupyter render) shows the title as the name, with no tag of
    the name's own; an underscore between letters stays unescaped (a title pasted as plain text reads)."""
    import html

    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").render(f"# Feedback: {markdown_text(name)}").strip()
    assert rendered.startswith("<h1>Feedback: ") and rendered.endswith("</h1>"), rendered
    inner = rendered.removeprefix("<h1>Feedback: ").removesuffix("</h1>")
    assert "<" not in inner and html.unescape(inner) == name, rendered
    if name.startswith("jane"):
        assert markdown_text(name) == name


# round 8b: the helper's re-check of these fixes


@pytest.mark.parametrize(
    "source, said",
    [
        (
            "import json\nfrom unittest import mock\nmock.patch.object(json, 'dumps', lambda *a, **k: '{}').start()",
            "imports unittest",
        ),
        ("import io, unittest.mock\nunittest.mock.patch.object(io, 'open_code', print).start()", "imports unittest"),
        ("import sys\nsys.path_hooks.insert(0, lambda path: None)", "uses sys.path_hooks"),
        ("import sys\nsys.meta_path.insert(0, object())", "uses sys.meta_path"),
    ],
)
def test_a_function_replaced_by_its_name_or_an_import_hook_is_said(exercise, source, said):
    nb = with_cell(grading.student_version(exercise.reference), source)
    assert said in " ".join(integrity.suspicious(nb, exercise))


def test_other_semicolons_and_the_last_invisible_characters():
    assert gradebook.csv_cell("x\u061b=1+1") == "x\u061b'=1+1" and gradebook.csv_cell('a;"=1"') == "a;\"'=1\""
    for char in ("\u2800", "\U00016fe4", "\U0001d159", "\U0001da9b"):
        assert char not in escape_controls(f"bob{char}.ipynb"), repr(char)
