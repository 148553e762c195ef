"""Round 3 of a helper acting as a lecturer (a class of ten it wrote, Canvas's and Moodle's exports): what
an honest student and a lecturer lost, each fixed behaviour asserted without a kernel. The command-line
cases (a regrade with a later deadline, extensions, a class the grader failed on, Moodle's Status) are in
tests/test_grading_week.py beside the stand-in grader they use.

- a BERT built without its pooler (``add_pooling_layer=False``, the encoder of a masked-LM model) got ✓ for
  task 1 in the notebook and 0 from the grader, which called it "not a real model";
- a renamed variable hid a copy; an error in a cell whose first line holds "; " cut the feedback apart;
- every student who plotted got an "outputs differ" line (the sealed run draws with Agg).
"""

import nbformat
import pytest
import torch
from transformers import BertModel

from bertfamily import budget, mistakes
from bertfamily.grading import copies, verify
from bertfamily.grading.nbval_worker import place_independent
from bertfamily.grading.scoring import _where
from bertfamily.models import published_config

POOLER = "the encoder without its pooler"


def test_a_bert_without_its_pooler_fails_task_1_alike_in_the_notebook_and_in_the_grader():
    config = published_config("bert-base-uncased")
    with torch.device("meta"):
        bare = BertModel(config, add_pooling_layer=False)
        whole = BertModel(config)
    assert POOLER in mistakes.model_mistake(bare, "bert", "bert-base-uncased", config)
    assert mistakes.model_mistake(whole, "bert", "bert-base-uncased", config) is None
    settings = {k: v for k, v in config.to_dict().items() if v is None or isinstance(v, (bool, int, float, str))}
    summary = {
        "module": "BertModel",
        "object": 1,
        "config": settings,
        "linear": 73,
        "dynamic": [],
        "values": sum(p.numel() for p in bare.parameters()),
    }
    assert summary["values"] == budget.count(config) - (768 * 768 + 768)
    assert POOLER in verify._not_its_configuration(summary)
    assert verify._not_its_configuration({**summary, "values": budget.count(config)}) is None


def test_a_copy_with_renamed_variables_is_flagged_and_different_code_is_not():
    one = "total = 0\nfor name, p in model.named_parameters():\n    total += p.numel()\nprint(total)"
    two = "# mine\ncount = 0\nfor n, q in model.named_parameters():\n    count += q.numel()\nprint(count)"
    other = "total = sum(p.numel() for p in model.parameters())\nprint(total)"
    canon = copies.renamed((copies.normalized(one),))
    assert canon == copies.renamed((copies.normalized(two),)) != copies.renamed((copies.normalized(other),))
    assert ("print" in str(canon)) and ("numel" in str(canon))  # built-ins and attributes keep their names


def test_a_renamed_copy_is_flagged_when_the_names_are_in_f_strings_too():
    """The lecturer, round 5 (P4): Python 3.11 reads an f-string as one token, so a copy whose renamed
    variable was printed in an f-string read as other code, and went unflagged."""
    one = 'size_mb = total / 2**20\nprint(f"{size_mb:.1f} MiB, {{not a field}} {model.config.dim} {size_mb}")'
    two = 'mib = total / 2**20\nprint(f"{mib:.1f} MiB, {{not a field}} {model.config.dim} {mib}")'
    other = 'mib = total / 2**20\nprint(f"{mib:.1f} MB, {{not a field}} {model.config.dim} {mib}")'
    canon = [copies.renamed((copies.normalized(code),)) for code in (one, two, other)]
    assert canon[0] == canon[1] != canon[2]  # the text around the fields stays as written
    assert "|v0:.1f|v2.config.dim|v0'" in str(canon[0]), canon[0]  # attributes keep their names; {{ is text


def test_a_renamed_copy_with_a_line_added_is_flagged_and_honest_overlap_is_not():
    """The lecturer, round 5 (P4): Mai's code renamed, with one print added, was not flagged (the whole code had
    to be the same). Cells the same once renamed, 90% of each one's code: flagged; 70% (honest students who
    wrote from the same lessons shared that much in the lecturer's class): not."""
    cell = [(("c", n), 6) for n in range(10)]  # ten renamed cells of six lines
    lined = {
        "mai": cell,
        "chloe": cell + [(("added", 0), 3)],
        "ingrid": cell[:7] + [(("own", n), 6) for n in range(3)],
    }
    found = sorted(copies._near_copies(lined, set()))
    assert found == [("chloe", "mai", 60, 63), ("mai", "chloe", 60, 60)], found
    assert list(copies._near_copies(lined, {("chloe", "mai")})) == []  # flagged already as a whole


def test_an_error_in_a_cell_whose_first_line_holds_a_semicolon_keeps_the_feedback_whole():
    source = "# Save both state_dicts in `workdir`; their sizes in bytes\nx = y"
    where = _where(source, {"traceback": ["Cell In[3], line 2"]})
    assert "; " not in where and "`` # Save both state_dicts in `workdir`;" in where, where


@pytest.mark.parametrize(
    "data", [{"image/png": "iVBOR", "text/plain": "<Figure size 640x480 with 1 Axes>"}, {"image/svg+xml": "<svg/>"}]
)
def test_a_figure_is_not_compared(data):
    figure = nbformat.v4.new_output("display_data", data=data)
    printed = nbformat.v4.new_output("stream", name="stdout", text="66362880\n")
    assert place_independent([figure, printed]) == [printed]


# round 3b: the helper's re-check of these fixes


def test_the_graders_extension_moves_the_lms_verdict_too():
    from datetime import datetime, timedelta

    from bertfamily.grading.lateness import late_by, moodle_duration
    from bertfamily.grading.pipeline import Row

    due = datetime.fromisoformat("2026-03-01T23:59:00-08:00")
    week = due + timedelta(days=7)
    moodle = Row(
        "m/greta.ipynb", "graded", 1, 1, {}, "", time_from="Moodle's worksheet; Moodle's Status: 2 days 9 hours late"
    )
    assert late_by(moodle, due) > timedelta(days=2, hours=9)
    assert late_by(moodle, due, due + timedelta(days=1)) == timedelta(days=1, hours=9, seconds=1)
    assert late_by(moodle, due, week) is None
    canvas = Row(
        "c/greta_LATE.ipynb",
        "graded",
        1,
        1,
        {},
        "",
        submitted=(due + timedelta(days=2)).isoformat(),
        time_from="the file's modification time; Canvas marked it LATE",
    )
    assert late_by(canvas, due) == timedelta(days=2) and late_by(canvas, due, week) is None
    assert moodle_duration("1 day") > timedelta(days=1)  # Moodle's "1 day" may be 1 day 0 h 40 min: 2 started days
    assert moodle_duration("3 mins 5 secs") == timedelta(minutes=3, seconds=5)


def test_a_later_tasks_line_names_the_cell_that_stopped_whole():
    from bertfamily.grading.causes import needs

    errors = {
        "task6": [
            "cell 28 raised NameError (the cell that starts `# Task 2: save; sizes`, line 3: `x`): "
            "name 'y' is not defined"
        ]
    }
    said = needs("task7", "int8_bytes", {"int8_bytes": "task6"}, errors)
    assert said == "task7 needs `int8_bytes` from task6, where cell 28 raised NameError", said


def test_a_reduction_from_a_bert_without_its_pooler_says_so():
    from bertfamily import checks

    distil, bert = checks.expected_counts()
    hint = mistakes.reduction_mistake(
        1 - distil / (bert - 768 * 768 - 768), 1 - distil / bert, 5e-4, 1 - distil / (bert - 768 * 768 - 768)
    )
    assert "without its pooler" in hint


def test_a_worksheet_downloaded_in_another_zone_is_said():
    from datetime import datetime, timedelta

    from bertfamily.grading.lateness import worksheet_offset
    from bertfamily.grading.pipeline import Row

    due = datetime.fromisoformat("2026-03-01T23:59:00-08:00")

    def row(late, read_as):  # a late submission as a worksheet from Rome shows it: 9 hours later
        return Row(
            "m.ipynb",
            "graded",
            1,
            1,
            {},
            "",
            submitted=(due + read_as).isoformat(),
            time_from=f"Moodle's worksheet; Moodle's Status: {late} late",
        )

    rome = [row("1 day 10 hours", timedelta(days=1, hours=19, minutes=30)), row("2 hours", timedelta(hours=11))]
    assert worksheet_offset(rome, due) == timedelta(hours=9)
    here = [row("1 day 10 hours", timedelta(days=1, hours=10, minutes=30)), row("2 hours", timedelta(hours=2))]
    assert worksheet_offset(here, due) is None and worksheet_offset([], due) is None


# round 3c: a reviewer's reading of these fixes


def test_an_extension_moodle_granted_is_not_counted_twice_and_one_before_the_deadline_is_refused(exercise):
    from datetime import datetime, timedelta

    from bertfamily.grading import policy
    from bertfamily.grading.lateness import late_by
    from bertfamily.grading.pipeline import Row

    due = datetime.fromisoformat("2026-03-01T23:59:00-08:00")
    text = "Moodle's worksheet; Moodle's Status: 2 days 1 hour late; Moodle's Status: extension granted"
    row = Row("m/g.ipynb", "graded", 1, 1, {}, "", time_from=text)
    assert late_by(row, due, due + timedelta(days=4)) > timedelta(days=2)  # Moodle's verdict already counts it
    with pytest.raises(ValueError, match="is not after the deadline"):
        policy.load(exercise, due=due.isoformat(), extensions=["alice=2026-02-28T12:00-08:00"])


def test_moodle_with_no_due_date_of_its_own_is_said():
    from datetime import datetime

    from bertfamily.grading.lateness import unmarked_late
    from bertfamily.grading.pipeline import Row

    due = datetime.fromisoformat("2026-03-01T23:59:00-08:00")
    far = Row(
        "m.ipynb",
        "graded",
        1,
        1,
        {},
        "",
        submitted="2026-03-03T12:00:00-08:00",
        time_from="Moodle's worksheet; Moodle's Status does not say late",
    )
    near = Row("n.ipynb", "graded", 1, 1, {}, "", submitted="2026-03-02T08:00:00-08:00", time_from=far.time_from)
    assert unmarked_late([far, near], due) == [far]  # 9 h past: a time zone; 36 h: no due date in Moodle


def test_a_moodle_comment_shows_its_characters_and_starts_no_formula():
    import csv

    from bertfamily.grading.moodle import _html

    said = _html("size >= 50 MiB; =HYPERLINK(1); -1")
    assert "&gt;&#61;" in said and "; &#61;HYPERLINK" in said and "; &#45;1" in said
    for cell in next(csv.reader([said], delimiter=";")):
        assert not cell.lstrip().startswith(("=", "+", "-", "@")), cell


def test_other_libraries_or_classes_are_other_code():
    one = "import numpy as np\nx = np.sum([1, 2])\nprint(x)"
    two = "import torch\nx = torch.sum([1, 2])\nprint(x)"
    same = "import numpy as np\ntotal = np.sum([1, 2])\nprint(total)"
    a, b, c = (copies.renamed((copies.normalized(s),)) for s in (one, two, same))
    assert a != b and a == c


def test_a_quoted_cell_is_cut_at_a_space_and_says_so():
    """The lecturer, round 5 (P7): "`# Multilingual DistilBERT: load, count, quantise in place, w`"."""
    source = "# Multilingual DistilBERT: load, count, quantise in place, with care\nx = = 1"
    where = _where(source, None, "invalid syntax (line 2)")
    assert "`# Multilingual DistilBERT: load, count, quantise in place, …`" in where, where
    assert "line 2: `x = = 1`" in where


def test_an_outputs_difference_shows_no_colour_codes():
    """The lecturer, round 5 (P7): pip's colours reached the student as `\\x1b[33mWARNING: ...`."""
    from bertfamily.grading.scoring import _difference

    entry = {
        "outcome": "failed",
        "message": "Cell outputs differ",
        "stored": "\x1b[33mWARNING: pip\x1b[0m",
        "rerun": "",
    }
    assert _difference(3, entry) == "cell 3: stored 'WARNING: pip', re-run ''"
