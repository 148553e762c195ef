"""Regrading a class (bertfamily.grading: the gradebook).

Fast tests cover reading, preparing and the command line without a kernel. The integration tests
plant a class of submissions made at test time from the student version of the exercise (the
generator's own output with the reference solutions put back, then spoiled in one way each), grade
them and the course's solution notebook once with two jobs, and check every row; a serial run of a
subset must give the same rows, and no submitted file may change.
"""
import copy
import csv
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from bertfamily import grading

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"
#: The correct exercise peaks near 1.3 GiB (kernel and grader); a hog reaches this in a second.
MEMORY_MIB = 2048
BATCH = grading.Limits(cell_timeout=300, timeout=900, memory_mib=MEMORY_MIB)


def cell_of(nb, task, tag):
    """The cell of ``task`` that the reference tags ``tag`` (solution or check), found by id in ``nb``."""
    reference = {c.get("id"): c for c in grading.Exercise.load(EXERCISE).reference.cells}
    ids = [cid for cid in task.cells if tag in reference[cid].metadata.get("tags", [])]
    return next(c for c in nb.cells if c.get("id") == ids[0])


def text_of(cell):
    return "".join(o.get("text", "") for o in cell.outputs)


# ------------------------------------------------------------------ without a kernel


def test_exercise_tasks(exercise):
    """One task per {exercise} directive; the check of task N prints "Task N"; only the timing is ungraded."""
    directives = sum("{exercise}" in c.source for c in exercise.reference.cells if c.cell_type == "markdown")
    assert [t.name for t in exercise.tasks] == [f"task{n}" for n in range(1, directives + 1)]
    for n, task in enumerate(exercise.tasks, 1):
        assert task.checks and set(dict(task.checks)) <= set(task.cells)
        for cid, _ in task.checks:
            stored = text_of(next(c for c in exercise.reference.cells if c.get("id") == cid))
            assert stored.startswith(f"✓ Task {n}"), stored
    ungraded = [t for t in exercise.tasks if not t.graded]
    assert len(ungraded) == 1 and "Time it" in ungraded[0].title


def other_assignment():
    """The student version of a small exercise that is not this one."""
    return grading.student_version(new_notebook(cells=[
        new_markdown_cell("```{exercise} Add\n:label: ex-add\nCompute x.\n```"),
        new_code_cell("x = 1 + 1", metadata={"tags": ["solution"]}),
        new_code_cell("print('✓ Task 1 (add)' if x == 2 else '✗ Task 1 (add)')", metadata={"tags": ["check"]}),
    ]))


@pytest.mark.parametrize("data, reason", [
    (b"", "empty file"),
    (b"  \n", "empty file"),
    (b'{"cells": [', "invalid JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[1, 2]", "nbformat"),
    (b'{"nbformat": 3, "worksheets": []}', "nbformat"),
    (b'{"nbformat": 4, "nbformat_minor": 5, "cells": "none", "metadata": {}}', "not a valid notebook"),
    (nbformat.writes(other_assignment()).encode(), "not this exercise"),
])
def test_read_submission_refuses(exercise, data, reason):
    with pytest.raises(grading.Invalid, match=reason):
        grading.read_submission(data, exercise.tasks, exercise.name)


def test_prepare_takes_nbval_markers_from_the_reference(exercise):
    """A student cannot exempt a cell from the comparison; the ungraded timing task's check is skipped
    and its other cells run with their outputs and errors not counted (a helper it defines stays)."""
    nb = copy.deepcopy(exercise.reference)
    task2 = exercise.tasks[1]
    solution = cell_of(nb, task2, "solution")
    solution.metadata["tags"] = ["solution", "nbval-ignore-output"]
    check = cell_of(nb, task2, "check")
    check.source = "# NBVAL_IGNORE_OUTPUT\n" + check.source
    prepared = grading.prepare(nb, exercise).nb
    by_id = {c.get("id"): c for c in prepared.cells}
    assert by_id[solution.id].metadata["tags"] == ["solution"]
    assert "NBVAL" not in by_id[check.id].source and check.source.endswith(by_id[check.id].source.strip())
    setup = next(c for c in exercise.reference.cells if "nbval-ignore-output" in c.metadata.get("tags", [])
                 and "check" not in c.metadata.get("tags", []) and "solution" not in c.metadata.get("tags", []))
    assert "nbval-ignore-output" in by_id[setup.id].metadata["tags"]  # the reference's own tag stays
    timing = next(t for t in exercise.tasks if not t.graded)
    assert all("nbval-skip" in by_id[cid].metadata["tags"] for cid, _ in timing.checks)
    others = [cid for cid in timing.cells if cid not in dict(timing.checks)]
    assert others and all({"nbval-ignore-output", "raises-exception"} <= set(by_id[cid].metadata["tags"])
                          for cid in others)
    assert nbformat.writes(nb) != nbformat.writes(prepared)  # a copy: nb keeps its tags
    assert "nbval-ignore-output" in solution.metadata["tags"]


def test_place_dependent_outputs_are_not_compared():
    out = [nbformat.v4.new_output("stream", name="stderr", text="a warning\n"),
           nbformat.v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {},
                                                        "text/plain": "Loading weights: 100%"}),
           nbformat.v4.new_output("stream", name="stdout", text="DistilBERT 66,362,880 parameters\n"),
           nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>"})]
    assert grading.place_independent(out) == out[2:]


def test_prepare_restores_check_cells_from_the_reference(exercise):
    nb = copy.deepcopy(exercise.reference)
    check = cell_of(nb, exercise.tasks[2], "check")
    original = check.source
    check.source = "print('✓ Task 3 (the reduction): trust me')"
    prepared = grading.prepare(nb, exercise).nb
    assert next(c for c in prepared.cells if c.get("id") == check.id).source == original
    assert check.source != original  # the submission itself is untouched


def test_model_source_line_is_not_compared():
    """A student who had the hub online saw another provenance line; it sanitizes to the same text."""
    from nbval.plugin import get_sanitize_patterns

    patterns = get_sanitize_patterns(grading._sanitizers())
    assert patterns[0] == grading.MODEL_SOURCE

    def clean(s):
        for regex, replace in patterns:
            s = re.sub(regex, replace, s)
        return s
    offline = ("no model hub here: built distilbert-base-uncased from its published configuration with "
               "random weights (parameter counts and file sizes are exact, predictions are meaningless)\n")
    online = "loaded distilbert-base-uncased from the Hugging Face hub (pretrained weights)\n"
    assert clean(offline) == clean(online) == "MODEL SOURCE\n"
    from bertfamily.models import exercise_source  # the exercise's own line, since students write the loading
    assert clean(exercise_source(True) + "\n") == clean(exercise_source(False) + "\n") == "MODEL SOURCE\n"
    assert clean("DistilBERT 66,362,880 parameters\n") == "DistilBERT 66,362,880 parameters\n"


def test_sandbox_env_is_scrubbed(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("GITHUB_TOKEN", "secret")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    env = grading.sandbox_env(tmp_path)
    assert not {"HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "PYTHONPATH"} & set(env)
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    assert Path(env["HOME"]).is_relative_to(tmp_path) and Path(env["HF_HOME"]).is_relative_to(tmp_path)
    assert "hf_secret" not in json.dumps(env)


@pytest.mark.sandbox
def test_sandbox_run_on_a_tiny_notebook(monkeypatch, tmp_path):
    """The kernel sees no token, is offline, and works in a temporary copy (a few seconds: no torch)."""
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.chdir(tmp_path)
    nb = new_notebook(cells=[new_code_cell(
        "import os\nprint(os.environ.get('HF_TOKEN'), os.environ['HF_HUB_OFFLINE'])\n"
        "print(os.listdir('.'), os.getcwd() != %r)" % str(tmp_path))])
    run = grading.run_sandboxed(nb, grading.Limits(cell_timeout=60, timeout=120), "")
    assert run["status"] == "" and run["exit_code"] == 0, run["log"]
    assert run["results"][0]["outputs"][0]["text"] == "None 1\n['submission.ipynb'] True\n"
    assert list(tmp_path.iterdir()) == []


def test_cli_bad_input(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "gradebook.csv"
    cases = [([str(tmp_path / "missing.ipynb")], "no such file"),
             ([str(tmp_path / "empty")], "nothing to grade"),
             ([str(EXERCISE), "--jobs", "0"], "at least 1"),
             ([str(EXERCISE), "--memory-mib", "0"], "positive")]
    for args, message in cases:
        assert grading.main([*args, "--out", str(out)]) == 2
        assert message in capsys.readouterr().err
    submission = tmp_path / "sub.ipynb"
    submission.write_bytes(b"{}")
    assert grading.main([str(submission), "--out", str(submission), "--force"]) == 2
    assert "is one of the submissions" in capsys.readouterr().err
    out.write_text("my marks\n")
    assert grading.main([str(submission), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == "my marks\n" and submission.read_bytes() == b"{}"
    assert grading.main([str(submission), "--out", str(tmp_path / "no" / "g.csv")]) == 2
    with pytest.raises(SystemExit):
        grading.main([str(submission)])  # --out is required
    assert not out.exists() or out.read_text() == "my marks\n"


def test_write_gradebook_is_atomic_and_refuses_to_overwrite(tmp_path, exercise):
    out = tmp_path / "g.csv"
    row = grading.Row("a.ipynb", "invalid", None, len(exercise.graded),
                      dict.fromkeys(t.name for t in exercise.graded), "empty file")
    grading.write_gradebook([row], exercise, out)
    first = out.read_text()
    with pytest.raises(ValueError, match="--force"):
        grading.write_gradebook([], exercise, out)
    assert out.read_text() == first
    grading.write_gradebook([], exercise, out, force=True)
    assert out.read_text().splitlines() == [",".join(grading.gradebook_fields(exercise))]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.csv"]  # no temporary file left behind


# ------------------------------------------------------------------ a planted class


def snapshot(folder):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(Path(folder).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def planted(tmp_path_factory, exercise):
    """A class folder of spoiled submissions, each made from the student version of the exercise."""
    root = tmp_path_factory.mktemp("class")
    student_path = root / "student.ipynb"
    assert grading.write_student(EXERCISE, student_path) == "written"
    student = nbformat.read(student_path, as_version=4)
    student_path.unlink()
    filled = grading.restore_solutions(student, exercise.reference)
    tasks = {t.name: t for t in exercise.tasks}
    # Fully correct: the reference answers, run. The code cells are the reference's, so its stored
    # outputs are what that run prints: copy them (by cell id) rather than execute again.
    reference = {c.get("id"): c for c in exercise.reference.cells}
    correct = copy.deepcopy(filled)
    for cell in correct.cells:
        if cell.cell_type == "code":
            assert cell.source == reference[cell.id].source
            cell.outputs = copy.deepcopy(reference[cell.id].outputs)
            cell.execution_count = reference[cell.id].execution_count

    # One wrong answer (task 3: the fraction DistilBERT keeps), run as a student runs it (a copy, in
    # a temporary folder); the timing stretch is left as the student version has it, not attempted.
    wrong = copy.deepcopy(filled)
    cell_of(wrong, tasks["task3"], "solution").source = (
        "# The fraction (0 to 1) of BERT-base's parameters that DistilBERT removes.\n"
        "reduction = distilbert_count / bert_count\nprint(reduction)")
    timing = next(t for t in exercise.tasks if not t.graded)
    cell_of(wrong, timing, "solution").source = cell_of(student, timing, "solution").source
    unexecuted = root / "unexecuted.ipynb"
    nbformat.write(wrong, unexecuted)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        wrong = grading.execute_copy(unexecuted, timeout=600)
    assert "✗ Task 3" in text_of(cell_of(wrong, tasks["task3"], "check"))

    def spoiled(task, tag, source=None, output=None):
        nb = copy.deepcopy(correct)
        cell = cell_of(nb, tasks[task], tag)
        if source is not None:
            cell.source = source
        if output is not None:
            assert cell.outputs and cell.outputs[0].output_type == "stream"
            cell.outputs[0].text = output
        return nb

    klass = root / "class"
    klass.mkdir()
    notebooks = {
        "correct": correct,
        "wrong_answer": wrong,
        # typed into the output: the counts a student wished for, not what the code prints
        "edited_output": spoiled("task2", "solution",
                                 output="DistilBERT 66,000,000 parameters, BERT-base 110,000,000\n"),
        "syntax_error": spoiled("task7", "solution",
                                source='kept_fp32 = ("the embeddings stay in fp32"'),
        "memory_hog": spoiled("task1", "solution",
                              source="hog = []\nwhile True:\n    hog.append(bytearray(2**27))"),
        "vandal": spoiled("task1", "solution", source=(
            "import os, shutil, signal\nfor name in os.listdir('.'):\n"
            "    shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)\n"
            "os.kill(os.getpid(), signal.SIGKILL)")),
        "other_assignment": other_assignment(),
        # run online: transformers' progress widget and its stderr load report in task 1's cell
        "online": online(correct, tasks),
        # a stray keystroke (a trailing newline) in task 3's check cell: restored, noted, no mark lost
        "check_edited": spoiled("task3", "check", source=cell_of(correct, tasks["task3"], "check").source + "\n"),
        # saved by an editor that drops cell ids (nbformat 4.4): matched by the check cells' code
        "no_ids": without_ids(correct),
        # task 3's check cell deleted: put back from the course's copy, run, noted
        "check_deleted": without_cell(correct, cell_of(correct, tasks["task3"], "check").id),
        # every output cleared before handing in: graded from the re-run, reproduction not checked
        "cleared": cleared(correct),
        # two-line cheats: a wrong reduction with the check replaced in the kernel, or print patched
        "cheat_check": spoiled("task3", "solution", source=(
            "reduction = 0.5\ncheck_reduction = checks.check_reduction\n"
            "checks.check_reduction = lambda r: print('✓ Task 3 (the reduction): DistilBERT has 39.5% fewer')")),
        "cheat_print": spoiled("task3", "solution", source=(
            "import builtins; _print = builtins.print; reduction = 0.5\n"
            "builtins.print = lambda *a, **k: _print(*(str(x).replace('✗', '✓') for x in a), **k)")),
    }
    for name, nb in notebooks.items():
        nbformat.write(nb, klass / f"{name}.ipynb")
    text = nbformat.writes(correct)
    (klass / "invalid_json.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")  # save cut short
    (klass / "empty.ipynb").write_bytes(b"")
    loop = root / "loop"
    loop.mkdir()
    looping = copy.deepcopy(correct)  # a cell added at the top: the limit can be short
    looping.cells.insert(0, new_code_cell("while True:\n    pass"))
    nbformat.write(looping, loop / "infinite_loop.ipynb")
    paths = {p.stem: p for p in [*klass.iterdir(), *loop.iterdir()]}
    before = snapshot(root) | {EXERCISE: (EXERCISE.read_bytes(), EXERCISE.stat().st_mtime_ns)}
    return {"root": root, "class": klass, "loop": loop, "paths": paths, "before": before}


def without_ids(nb):
    out = copy.deepcopy(nb)
    for cell in out.cells:
        cell.pop("id", None)
    out.nbformat_minor = 4
    return out


def without_cell(nb, cid):
    out = copy.deepcopy(nb)
    out.cells = [c for c in out.cells if c.get("id") != cid]
    return out


def cleared(nb):
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return out


def online(correct, tasks):
    """``correct`` as a student with the hub online saved it: a progress widget and stderr lines."""
    nb = copy.deepcopy(correct)
    cell = cell_of(nb, tasks["task1"], "solution")
    widget = {"model_id": "0a1b2c", "version_major": 2, "version_minor": 0}
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": widget,
                                                     "text/plain": "Loading weights: 100%|##########| 199/199"}),
        nbformat.v4.new_output("stream", name="stderr", text="BertModel LOAD REPORT from: bert-base-uncased\n"
                               "Key                        | Status     |\ncls.predictions.bias | UNEXPECTED |\n"),
        *cell.outputs]
    return nb


@pytest.fixture(scope="module")
def batch(planted, exercise):
    """The class folder and the course's own solution notebook, graded once with two jobs."""
    rows = grading.grade_class([planted["class"], EXERCISE], exercise, BATCH, jobs=2, progress=False)
    return {Path(r.submission).stem: r for r in rows}, rows


def test_batch_rows_are_sorted_and_complete(batch, planted):
    by_name, rows = batch
    assert [r.submission for r in rows] == sorted(r.submission for r in rows)
    assert set(by_name) == {p.stem for p in planted["class"].iterdir()} | {EXERCISE.stem}


def test_an_edited_check_cell_is_restored_and_noted(batch, exercise):
    row = batch[0]["check_edited"]
    assert (row.status, row.score) == ("graded", len(exercise.graded)), row
    assert row.detail.startswith("task3: its check cell") and "restored" in row.detail, row.detail


@pytest.mark.parametrize("name", ["exercise_distilbert", "correct", "online"])
def test_full_marks(batch, exercise, name):
    """The course's solution notebook, and the student version with the solutions put back."""
    row = batch[0][name]
    assert (row.status, row.score, row.max_score, row.detail) == ("graded", len(exercise.graded),
                                                                 len(exercise.graded), "")
    assert set(row.tasks.values()) == {1} and row.outputs == "reproduced" and row.flags == ""
    assert row.read_by_hand.startswith("task7: quantize_dynamic converted only the nn.Linear layers")


@pytest.mark.parametrize("name, note", [
    ("no_ids", "the notebook has no cell ids (saved by an older editor)"),
    ("check_deleted", "task3: its check cell was deleted; the course's copy was put back and run"),
    ("cleared", ""),
])
def test_full_marks_after_an_accident(batch, exercise, name, note):
    """An honest student loses nothing for an editor, a deleted check cell or cleared outputs."""
    row = batch[0][name]
    assert (row.status, row.score, row.flags) == ("graded", len(exercise.graded), ""), row
    assert note in row.detail and "✗" not in row.detail, row.detail
    if name == "cleared":  # graded from the re-run; nothing stored to compare
        assert row.outputs.count("not checked: handed in without outputs") == len(exercise.graded)


def test_an_output_typed_by_hand_is_reported_not_scored(batch, exercise):
    """The mark comes from the re-run; the stored output that does not reproduce is said beside it."""
    row = batch[0]["edited_output"]
    assert (row.status, row.score, row.detail) == ("graded", len(exercise.graded), ""), row
    assert row.outputs.startswith("task2: differs: cell") and "66,000,000" in row.outputs
    assert "66,362,880" in row.outputs


@pytest.mark.parametrize("name, said", [("cheat_check", "replaces bertfamily.checks.check_reduction"),
                                        ("cheat_print", "imports builtins")])
def test_a_two_line_cheat_gains_nothing_and_is_flagged(batch, exercise, name, said):
    """A check replaced or print patched in the kernel changes nothing: the grader's check of the
    answer sent says ✗; the code that tried, and the typed 0.5, are flagged for the instructor."""
    row = batch[0][name]
    assert row.status == "graded" and row.score == len(exercise.graded) - 1, row
    assert [t for t, mark in row.tasks.items() if mark == 0] == ["task3"]
    assert "task3: ✗ Task 3 (the reduction): not the reduction yet" in row.detail
    assert said in row.flags and "task3: `reduction` typed as a number" in row.flags, row.flags


@pytest.mark.parametrize("name, task, words", [
    ("wrong_answer", "task3", ["task3: ✗ Task 3 (the reduction)"]),
    ("syntax_error", "task7", ["task7: cell", "raised SyntaxError", "task7: cell"]),
])
def test_one_task_lost(batch, exercise, name, task, words):
    row = batch[0][name]
    assert row.status == "graded" and row.score == len(exercise.graded) - 1, row
    assert [t for t, mark in row.tasks.items() if mark == 0] == [task]
    for word in words:
        assert word in row.detail, row.detail
    assert all(part.startswith(f"{task}:") for part in row.detail.split("; ")), row.detail


@pytest.mark.parametrize("name, status, words", [
    ("memory_hog", "error", [f"out of memory: the run used more than {MEMORY_MIB} MiB", "(in cell"]),
    ("vandal", "error", ["the kernel died", "(in cell"]),
    ("invalid_json", "invalid", ["not a notebook: invalid JSON"]),
    ("other_assignment", "invalid", ["not this exercise"]),
    ("empty", "invalid", ["empty file"]),
])
def test_broken_submissions(batch, planted, exercise, name, status, words):
    row = batch[0][name]
    assert row.status == status, row
    for word in words:
        assert word in row.detail, row.detail
    if status == "invalid":
        assert row.score is None and set(row.tasks.values()) == {None}
    else:  # stopped in task 1: nothing after it ran
        assert row.score == 0 and set(row.tasks.values()) == {0}
        task1 = cell_of(nbformat.read(planted["paths"][name], as_version=4), exercise.tasks[0], "solution")
        index = nbformat.read(planted["paths"][name], as_version=4).cells.index(task1)
        assert f"(in cell {index})" in row.detail


@pytest.fixture(scope="module")
def loop_row(planted, exercise):
    """An infinite loop in a cell the student added at the top, under a short per-cell limit."""
    limits = grading.Limits(cell_timeout=5, timeout=300, memory_mib=MEMORY_MIB)
    (row,) = grading.grade_class([planted["loop"]], exercise, limits, jobs=1, progress=False)
    return row


def test_infinite_loop_times_out(loop_row):
    """The run stops at the loop: nothing after it is graded."""
    assert (loop_row.status, loop_row.score) == ("timeout", 0), loop_row
    assert set(loop_row.tasks.values()) == {0}
    assert loop_row.detail == "not in a task: cell 0 ran past the per-cell limit of 5 s"


@pytest.fixture(scope="module")
def serial(planted, batch, tmp_path_factory):
    """The command line, one job, on a subset given in reverse order: a correct, a failing, the invalid ones."""
    names = ["correct", "memory_hog", "invalid_json", "empty", "other_assignment"]
    out = tmp_path_factory.mktemp("gradebook") / "gradebook.csv"
    args = [str(planted["paths"][n]) for n in reversed(names)]
    args += ["--out", str(out), "--jobs", "1", "--memory-mib", str(MEMORY_MIB), "--cell-timeout", "300",
             "--timeout", "900"]
    return names, out, args, grading.main(args)


def test_serial_gradebook_matches_parallel(serial, batch, exercise, capfd):
    names, out, args, code = serial
    assert code == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == grading.gradebook_fields(exercise)
    assert [Path(r["submission"]).stem for r in rows] == sorted(names)
    for r in rows:
        b = batch[0][Path(r["submission"]).stem]
        expected = {"submission": b.submission, "status": b.status, "score": "" if b.score is None else str(b.score),
                    "max_score": str(b.max_score), "detail": b.detail, "outputs": b.outputs, "flags": b.flags,
                    "read_by_hand": b.read_by_hand,
                    **{k: "" if v is None else str(v) for k, v in b.tasks.items()}}
        assert r == expected
    # an existing gradebook is not overwritten without --force
    before = out.read_bytes()
    assert grading.main(args) == 2
    assert "--force" in capfd.readouterr().err
    assert out.read_bytes() == before


def test_cli_prints_progress_and_summary(tmp_path, planted, exercise, capsys):
    """A folder of submissions that need no kernel, then --force over the gradebook."""
    out = tmp_path / "g.csv"
    out.write_text("old\n")
    folder = tmp_path / "cheap"
    folder.mkdir()
    for name in ("empty", "invalid_json"):
        (folder / f"{name}.ipynb").write_bytes(planted["paths"][name].read_bytes())
    assert grading.main([str(folder), "--out", str(out), "--force", "--jobs", "2"]) == 0
    captured = capsys.readouterr()
    assert "grading" in captured.err and "2/2" in captured.err  # the progress bar
    assert "2 submissions: 2 invalid" in captured.out
    for t in exercise.graded:  # one line a task, its name padded to the longest ("task10")
        assert re.search(rf"^{t.name} +0/0  {re.escape(t.title)}$", captured.out, re.MULTILINE), t.name
    assert out.read_text().count("\n") == 3


def test_submissions_are_untouched(planted, batch, loop_row, serial):
    """After every run above (and a notebook that deleted its folder), every file is byte-for-byte the same."""
    after = snapshot(planted["root"]) | {EXERCISE: (EXERCISE.read_bytes(), EXERCISE.stat().st_mtime_ns)}
    assert after == planted["before"]


def test_readme_states_the_command_and_defaults():
    """The instructor section names the command, every status, and the limits the code defaults to."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## For instructors: regrading a class"):]
    limits = grading.Limits()
    for words in ["bertfamily-grade", "--out gradebook.csv", "--force", "--jobs",
                  f"`--cell-timeout` (default {limits.cell_timeout:g} s)", f"`--timeout` ({limits.timeout:g} s)",
                  f"`--memory-mib`, default {limits.memory_mib} MiB", "--network none",
                  *(f"| `{s}` |" for s in grading.STATUSES)]:
        assert words in section, words


def test_unsafe_mode_runs_bare_and_still_without_the_answer_key(tmp_path, monkeypatch):
    """--unsafe-no-sandbox: the kernel runs as the grader (no bubblewrap), but still imports the run's copy
    of the package, whose checks hold no expected values."""
    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(tmp_path))
    nb = new_notebook(cells=[new_code_cell(
        "import os\nfrom bertfamily import checks\ntry:\n    checks.expected_counts()\nexcept AttributeError as e:\n"
        "    print('no key:', 'answer key' in str(e))\nprint(os.getuid() == %d)" % os.getuid())])
    run = grading.run_sandboxed(nb, grading.Limits(cell_timeout=60, timeout=120, sandbox=False), "")
    assert run["status"] == "" and run["exit_code"] == 0, run["log"]
    assert run["results"][0]["outputs"][0]["text"] == "no key: True\nTrue\n"
    assert list(tmp_path.iterdir()) == []


def test_run_folders_of_graders_that_are_gone_are_swept(tmp_path):
    """A grading worker killed mid-run leaves its run's folder; the next run removes it, never a live one."""
    from bertfamily.grading import sandbox

    dead = 2**22 + 12345  # above any pid this machine hands out (pid_max is at most 2**22)
    (tmp_path / f"bertfamily-grade-{dead}-abc" / "home").mkdir(parents=True)
    (tmp_path / f"bertfamily-grade-{os.getpid()}-abc").mkdir()
    (tmp_path / "unrelated").mkdir()
    sandbox._sweep(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"bertfamily-grade-{os.getpid()}-abc", "unrelated"]


@pytest.mark.sandbox
def test_a_grader_killed_mid_class_leaves_no_process_behind(planted, tmp_path):
    """SIGKILL to ``bertfamily-grade`` while two kernels run: its pool workers, their nbval workers and
    the sandboxed kernels all end (Linux's parent-death signal, bwrap's --die-with-parent), instead of
    grading on as orphans."""
    import contextlib
    import shutil
    import signal
    import subprocess
    import sys
    import time

    import psutil

    klass = tmp_path / "class"
    klass.mkdir()
    for n in range(2):
        shutil.copy(planted["loop"] / "infinite_loop.ipynb", klass / f"loop{n}.ipynb")
    env = {**os.environ, "BERTFAMILY_GRADE_TMP": str(tmp_path)}
    command = "import sys; from bertfamily.grading import main; sys.exit(main(sys.argv[1:]))"
    grader = subprocess.Popen([sys.executable, "-c", command, str(klass), "--out", str(tmp_path / "gradebook.csv"),
                               "--jobs", "2", "--memory-mib", str(MEMORY_MIB)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, kernels = time.monotonic() + 120, []
        while time.monotonic() < deadline and len(kernels) < 2:
            time.sleep(0.5)
            family = psutil.Process(grader.pid).children(recursive=True)
            kernels = [p for p in family if p.name() != "bwrap" and "ipykernel_launcher" in p.cmdline()]
        assert len(kernels) == 2, "the two kernels never started"
        family = psutil.Process(grader.pid).children(recursive=True)
        grader.send_signal(signal.SIGKILL)
        grader.wait()
        _, alive = psutil.wait_procs(family, timeout=20)
        left = [" ".join(p.cmdline())[:120] for p in alive]
        for process in alive:  # not left spinning on the machine when the test fails
            with contextlib.suppress(psutil.Error):
                process.kill()
        assert not left, left
    finally:
        if grader.poll() is None:
            grader.kill()
