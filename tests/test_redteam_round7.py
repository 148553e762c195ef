"""Round 7 of the red team (a helper attacking the sealed grader with the course's real exercise): four ways
a submission with no work in it reached full marks with no flag, and one way it held up the whole class,
each with the safe behaviour asserted here on the grader's readers (fast: no kernel runs).

- a cell whose id the student ended in ``-course`` (the form of the grader's own copies of course cells) was
  never read by the integrity checks;
- a module's attribute replaced through an alias (``m = display; m.publish_display_data = relay``) or an
  item (``[display][0].x = ...``, ``sys.modules[k].x = ...``) was not said;
- lines added to the course's Colab set-up cell hid their ``sys.modules`` and ``subprocess`` behind the
  course's own (findings were subtracted by their text, not counted);
- a typed answer earned its mark when the student version's placeholder (``x = None``) stayed above it;
- the copy check read a 46 MB notebook of 9,000 cells for minutes in the grader's own process, outside every
  budget;
- a file name past 120 bytes got a feedback file without ``.md``.
"""

import os
import tempfile

import nbformat
import pytest
from grading_helpers import with_cell

from bertfamily import grading
from bertfamily.grading import causes, copies, integrity
from bertfamily.grading.budget import Budget, OverBudget
from bertfamily.grading.channel import read_names
from bertfamily.grading.submission import prepare

FORGE = """
from IPython import display
mod = display
keep = mod.publish_display_data
def relay(data, metadata=None, **kw):
    return keep(data, metadata=metadata, **kw)
mod.publish_display_data = relay
"""


@pytest.fixture(scope="module")
def answer_names(exercise):
    return {n for t in exercise.graded for _, s in t.checks for n in read_names(s)}


def student(exercise):
    """The handout as a student gets it: every solution cell its placeholder."""
    return grading.student_version(exercise.reference)


def test_the_handout_is_read_clean(exercise, answer_names):
    nb = student(exercise)
    assert integrity.suspicious(nb, exercise) == [] and causes.typed_answers(nb, exercise, answer_names) == {}


@pytest.mark.parametrize("cid", ["x-course", "forge-course"])
def test_a_cell_the_student_ids_like_the_graders_copies_is_read(exercise, answer_names, cid):
    nb = with_cell(student(exercise), "distilbert_count = 66362880\nbert_count = 109482240\n" + FORGE, cid)
    said = " ".join(integrity.suspicious(nb, exercise))
    assert "holds the number 66362880" in said and "replaces IPython.display.publish_display_data" in said, said
    assert set(causes.typed_answers(nb, exercise, answer_names)) == {"distilbert_count", "bert_count"}


def test_the_course_code_under_a_course_id_is_still_not_the_students(exercise):
    """The copy prepare() puts before a changed course cell holds the course's code: never flagged."""
    nb = student(exercise)
    setup = next(c for c in nb.cells if c.cell_type == "code" and "colab-setup" in c.metadata.get("tags", []))
    nb = with_cell(nb, setup.source, f"{setup['id']}-course")
    assert integrity.suspicious(nb, exercise) == []


def test_prepare_gives_a_student_cell_with_a_course_suffix_an_id_of_its_own(exercise):
    nb = with_cell(student(exercise), "x = 1", "mine-course")
    prepared = prepare(nb, exercise)
    ids = [c["id"] for c in prepared.nb.cells]
    assert "mine-course" not in ids and len(ids) == len(set(ids))


@pytest.mark.parametrize(
    "source",
    [
        FORGE,
        "from IPython import display\nfor m in [display]:\n    m.publish_display_data = print",
        "from IPython import display\n[display][0].publish_display_data = print",
        "import sys\nm = sys.modules['IPython.display']\nm.publish_display_data = print",
        "import sys\nsys.modules['IPython.display'].publish_display_data = print",
        "from IPython import display\na = display\nb = a\nb.publish_display_data = print",
        # round 7b: the channel's attributes, whatever reaches them
        "from IPython import display\ndef patch(m, fn):\n    m.publish_display_data = fn\npatch(display, print)",
        "from IPython import display\nmod, _ = display, 1\nmod.publish_display_data = print",
        "from IPython import display\n(mod := display).publish_display_data = print",
        "import importlib\nimportlib.import_module('IPython.display').publish_display_data = print",
        "def f():\n    from IPython import display\n    return display\nf().publish_display_data = print",
    ],
)
def test_a_module_attribute_replaced_through_an_alias_or_an_item_is_said(exercise, source):
    said = " ".join(integrity.suspicious(with_cell(student(exercise), source, "alias001"), exercise))
    assert ("replaces" in said or "uses .publish_display_data" in said) and "publish_display_data" in said, said


def test_an_honest_attribute_of_the_students_own_model_is_not_a_replacement(exercise):
    source = (
        "from transformers import AutoModel\nmodel = AutoModel.from_config(None)\n"
        "model.config.output_hidden_states = True\nfor m in [model]:\n    m.training = False"
    )
    assert integrity.suspicious(with_cell(student(exercise), source, "honest01"), exercise) == []


def test_lines_added_to_the_colab_cell_are_read_beside_the_courses_own(exercise):
    nb = student(exercise)
    setup = next(c for c in nb.cells if c.cell_type == "code" and "colab-setup" in c.metadata.get("tags", []))
    assert "sys.modules" in setup.source and "subprocess" in setup.source  # what the course's cell holds
    setup.source += (
        "\nmod = sys.modules['IPython.display']\nmod.publish_display_data = print\n"
        "import subprocess\nsubprocess.run(['true'])\n"
    )
    said = " ".join(integrity.suspicious(nb, exercise))
    assert "uses sys.modules" in said and "imports subprocess" in said and "replaces" in said, said


def test_a_typed_answer_below_the_placeholder_is_typed(exercise, answer_names):
    nb = student(exercise)
    task = next(c for c in nb.cells if "distilbert_count = None" in c.source)
    task.source += "\ndistilbert_count = 66362880\nbert_count = 109482240\n"
    typed = causes.typed_answers(nb, exercise, answer_names)
    assert set(typed) == {"distilbert_count", "bert_count"}, typed
    nb = with_cell(student(exercise), "distilbert_count = 66362880\nbert_count = 109482240", "typed001", after=4)
    typed = causes.typed_answers(nb, exercise, answer_names)  # in a cell of its own: that cell is named
    assert set(typed.values()) == {[c.get("id") for c in nb.cells].index("typed001")}, typed


def test_an_untouched_placeholder_is_not_a_typed_answer(exercise, answer_names):
    assert causes.typed_answers(student(exercise), exercise, answer_names) == {}


def huge(exercise, cells=700):
    nb = student(exercise)
    body = "a = 1; b = 2; c = a + b; d = (c, a, b)\n" * 50  # about 2 KB a cell: 1.4 MB of code in all
    nb.cells += [nbformat.v4.new_code_cell(body) for _ in range(cells)]
    return nb


def test_the_copy_check_reads_within_the_graders_budget(exercise, tmp_path):
    """Two copies of a notebook past the reading budget: not compared (before: read whole, for minutes on
    46 MB, and flagged identical); their rows already say "not read by the grader"."""
    with pytest.raises(OverBudget):
        copies.own_code(huge(exercise), exercise, Budget())
    found = []
    for name in ("a", "b"):
        nbformat.write(huge(exercise), tmp_path / f"{name}.ipynb")
        found.append((tmp_path / f"{name}.ipynb", name))
    assert copies.copy_flags(found, exercise) == {}
    small = [(tmp_path / f"{n}.ipynb", n) for n in ("c", "d")]
    for path, _ in small:
        nbformat.write(huge(exercise, cells=20), path)
    flags = copies.copy_flags(small, exercise)  # within the budget the same code is still found
    assert set(flags) == {"c", "d"} and "identical" in flags["c"][0], flags


def test_every_feedback_file_name_ends_in_md_and_fits_a_disk(tmp_path):
    from types import SimpleNamespace

    from bertfamily.grading.gradebook import feedback_names
    from bertfamily.grading.textsafe import MAX_NAME_BYTES

    rows = [SimpleNamespace(submission=f"class/{n}.ipynb") for n in ("L" * 240, "é" * 100, "x" * 110, "alice")]
    rows.append(SimpleNamespace(submission="late/alice.ipynb"))
    names = feedback_names(rows)
    assert all(n.endswith(".md") and len(n.encode()) <= MAX_NAME_BYTES for n in names), names
    assert len(set(names)) == len(names) and names[3].startswith("alice-")
    for name in names:
        (tmp_path / name).write_text("ok", encoding="utf-8")


def test_a_shell_line_is_said_as_a_shell_command_not_as_get_ipython(exercise):
    """A lecturer's trial: ``!ls -la {workdir}`` was said as "uses get_ipython", which the student never wrote.
    (Since round 10 a line that only looks, as that one, is not said at all: tests/test_redteam_round10.py.)"""
    said = " ".join(integrity.suspicious(with_cell(student(exercise), "!cp -r {workdir} /tmp/x", "shell001"), exercise))
    assert "runs a shell command (!)" in said and "get_ipython" not in said, said
    assert integrity.suspicious(with_cell(student(exercise), "!ls -la {workdir}", "shell002"), exercise) == []
    said = " ".join(
        integrity.suspicious(with_cell(student(exercise), "get_ipython().user_ns['x'] = 1", "ns000001"), exercise)
    )
    assert "uses get_ipython" in said, said


# ------------------------------------------------------------------ round 7b: the fixes, attacked again


def test_a_module_the_course_cell_imports_is_said_where_a_student_cell_uses_it(exercise):
    source = "subprocess.run(['true'])\nimportlib.import_module('ctypes')"
    said = " ".join(integrity.suspicious(with_cell(student(exercise), source, "uses0001"), exercise))
    assert "uses subprocess (run programs), imported in another cell" in said, said
    assert "uses importlib" in said, said


def test_six_hundred_shell_lines_are_unreadable_not_a_crash_of_the_class(exercise, tmp_path):
    """IPython gives up after 500 translations (RuntimeError), and costs the square of the lines before:
    the cell is read by hand and the copy check reads it as lines; the class goes on."""
    nb = with_cell(student(exercise), "\n".join(f"x{i} = !true" for i in range(600)), "shell600")
    said = " ".join(integrity.suspicious(nb, exercise))
    assert "cannot be read by the grader (more than 100 lines of magics" in said, said
    for name in ("a", "b"):
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    flags = copies.copy_flags([(tmp_path / f"{n}.ipynb", n) for n in ("a", "b")], exercise)
    assert "identical" in flags["a"][0], flags


def test_a_file_saved_deep_in_workdir_is_found_as_the_grader_finds_it(tmp_path, monkeypatch):
    """A lecturer's re-check: files kept in workdir/runs/2026-03-01/task6/distilbert/ (5 levels) got a ✗
    from the self-check and full marks from the grader, which looks 64 levels deep."""
    from bertfamily.answers import saved_file

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    deep = tmp_path.joinpath("workdir", "runs", "2026-03-01", "task6", "distilbert")
    deep.mkdir(parents=True)
    (deep / "fp32.pt").write_bytes(os.urandom(54_321))
    assert saved_file(54_321) == str(deep / "fp32.pt")
