"""The grader's repairs, its own check outside the kernel, strict outputs, roster, Canvas and feedback.

No kernel runs here: the runs are made by hand (what the sandbox records), so each rule is seen alone.
The planted class in test_gradebook.py runs them for real.
"""

import copy
import csv
import json

import nbformat
import pytest
import torch
from grading_helpers import message, passed_run

from bertfamily import grading
from bertfamily.grading import causes, channel, verify
from bertfamily.grading.scoring import NOT_STORED, REPRODUCED

EXPORTER = {}
exec(channel.EXPORTER, EXPORTER)  # the exporter as the kernel runs it


def check_cell(exercise, n):
    cid, source = exercise.tasks[n - 1].checks[0]
    return cid, source


def exported(**values):
    """What the exporter sends for these values, read back as the grader reads it."""
    return json.loads(EXPORTER["answers"](values, list(values)))


# ------------------------------------------------------------------ the grader's own check


def test_names_a_check_reads():
    assert verify.read_names("ok = checks.check_models(distilbert, bert)") == ["distilbert", "bert"]
    assert verify.read_names(
        "ok = checks.check_predicted_sizes(fp32_mib, int8_mib)\nok_factor = checks.check_combined_factor(factor)"
    ) == ["fp32_mib", "int8_mib", "factor"]
    assert verify.read_names("x = len(ok)\nprint(checks.c(x, y))") == ["ok", "y"]


def test_recheck_agrees_with_an_honest_answer_and_not_with_a_wrong_one(exercise, capsys):
    from bertfamily import checks

    _, source = check_cell(exercise, 3)
    right = checks.expected_reduction()
    assert verify.recheck(source, exported(reduction=right)) == (True, "")
    ok, why = verify.recheck(source, exported(reduction=0.5))
    assert not ok and why.startswith("✗ Task 3 (the reduction)")
    ok, why = verify.recheck(source, exported(reduction=torch.tensor(right)))
    assert ok, why  # a one-element tensor is a number to the check, in the kernel and here
    ok, why = verify.recheck(source, {"reduction": {"missing": True}})
    assert not ok and "not defined" in why
    assert capsys.readouterr().out == ""  # the grader's check prints nothing of its own


def test_recheck_sees_models_through_their_summaries(exercise):
    """Task 5 on stand-ins: a real quantised tiny DistilBERT exports what the check needs."""
    from transformers import DistilBertConfig, DistilBertModel

    from bertfamily import checks

    config = DistilBertConfig(
        **{**checks._config(checks.DISTILBERT).to_dict(), "n_layers": 1, "dim": 12, "hidden_dim": 16, "n_heads": 2}
    )
    fp32 = DistilBertModel(config)
    int8 = torch.quantization.quantize_dynamic(fp32, {torch.nn.Linear}, dtype=torch.qint8)
    summary = exported(distilbert_int8=int8, distilbert=fp32)
    assert summary["distilbert_int8"]["dynamic"] == ["qint8"] * 6 and summary["distilbert"]["linear"] == 6
    _, source = check_cell(exercise, 5)
    # the kernel's own check and the grader's, on the same objects and on their stand-ins, agree
    kernel = {"checks": checks, "distilbert_int8": int8, "distilbert": fp32}
    exec(source, kernel)
    ok, why = verify.recheck(source, summary)
    assert ok == kernel["ok"] is False and "6 of DistilBERT's linear layers" in why  # one layer, not six
    same = exported(distilbert_int8=fp32, distilbert=fp32)
    assert same["distilbert_int8"]["object"] == same["distilbert"]["object"]
    ok, why = verify.recheck(source, same)
    assert not ok and "is the fp32 model itself" in why


def test_the_exporter_never_raises_and_prints_nothing(capsys):
    class Weird:
        def __repr__(self):
            raise RuntimeError("no repr")

    found = json.loads(EXPORTER["answers"]({"w": Weird(), "n": float("nan")}, ["w", "n", "absent"]))
    EXPORTER["export"]({}, ["x"], "abc")  # outside a kernel: nothing to send to, silent
    assert capsys.readouterr().out == ""
    assert "__error__" in found or found["absent"] == {"missing": True}


def test_answers_count_only_from_their_own_check_cell_once():
    one = [message("c1", {"x": {"plain": 1}})]
    assert channel.answers_of("c1", one) == ({"x": {"plain": 1}}, "")
    assert channel.answers_of("c1", []) == (None, "")
    answers, why = channel.answers_of("c1", one + [message("c1", {"x": {"plain": 2}})])
    assert answers is None and "forged" in why  # a second message: neither counts
    answers, why = channel.answers_of("c2", one)
    assert answers is None and "did not send" in why


# ------------------------------------------------------------------ repairs before the run


def test_a_notebook_without_ids_is_matched_by_its_code(exercise):
    nb = copy.deepcopy(exercise.reference)
    for cell in nb.cells:
        cell.pop("id")
    nb.nbformat_minor = 4
    data = nbformat.writes(nb, version=4).encode()
    read = grading.read_submission(data, exercise.tasks, exercise.name)
    prepared = grading.prepare(read, exercise)
    ids = {c.get("id") for c in prepared.nb.cells}
    assert {cid for t in exercise.tasks for cid, _ in t.checks} <= ids
    assert prepared.notes and "no cell ids" in prepared.notes[0][1]
    assert prepared.nb.nbformat_minor >= 5


def test_deleted_check_cells_are_put_back_in_place(exercise):
    nb = copy.deepcopy(exercise.reference)
    cid, source = check_cell(exercise, 3)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == cid)
    del nb.cells[index]
    prepared = grading.prepare(nb, exercise)
    restored = prepared.nb.cells[index]
    assert restored.get("id") == cid and restored.source == source and restored.outputs == []
    assert prepared.notes == [("task3", "its check cell was deleted; the course's copy was put back and run")]


def test_a_changed_course_cell_runs_after_the_courses_version(exercise):
    """An addition is kept as it is; any other change runs after the course's own version, so a lost
    line is back and a changed line (``import os`` -> ``import os, math``) still counts."""
    nb = copy.deepcopy(exercise.reference)
    course = [
        c
        for c in nb.cells
        if c.cell_type == "code" and not {"solution", "check", "colab-setup"} & set(c.metadata.get("tags", []))
    ]
    first, second = course[0], course[1]
    original_first, original_second = first.source, second.source
    first.source = first.source.replace("import os\n", "import os, math\n")  # a changed line
    second.source = second.source + "\nimport numpy as np"  # an addition: kept, nothing inserted
    prepared = grading.prepare(nb, exercise)
    cells = prepared.nb.cells
    index = next(i for i, c in enumerate(cells) if c.get("id") == first.id)
    assert cells[index].source == first.source and "import os, math" in first.source
    assert cells[index - 1].source == original_first and cells[index - 1].id == f"{first.id}-course"
    assert next(c for c in cells if c.get("id") == second.id).source == original_second + "\nimport numpy as np"
    assert not any(c.get("id") == f"{second.id}-course" for c in cells)
    assert [what for _, what in prepared.notes] == [
        f"the course's cell {index - 1} was changed; the course's version ran just before it, then the student's"
    ]


# ------------------------------------------------------------------ scoring a run made by hand


def honest_answers(exercise):
    from bertfamily import checks

    count_d, count_b = checks.expected_counts()
    return {"reduction": checks.expected_reduction(), "distilbert_count": count_d, "bert_count": count_b}


def test_the_graders_check_alone_decides(exercise):
    """The kernel has no answer key: whatever it printed, the grader's check of the answers it sent
    decides; a check cell that ran but sent none is flagged."""
    prepared = grading.prepare(copy.deepcopy(exercise.reference), exercise)
    cid, _ = check_cell(exercise, 3)
    run = passed_run(prepared, exercise, {cid: exported(reduction=0.5)})
    score = grading.score_run(prepared, exercise, run, grading.Limits())
    flags = {f.split(":")[0]: f for f in score.flags}
    assert score.marks["task3"] == 0
    assert "task3: ✗ Task 3 (the reduction): not the reduction yet" in score.problems
    assert score.feedback["task3"][0].startswith("✗ Task 3 (the reduction): not the reduction yet (hint:")
    # a task whose answers never reached the grader (its exporter stopped in the kernel) does not count either
    assert score.marks["task2"] == 0 and "never reached the grader" in flags["task2"]
    honest = {cid: exported(reduction=honest_answers(exercise)["reduction"])}
    assert (
        grading.score_run(prepared, exercise, passed_run(prepared, exercise, honest), grading.Limits()).marks["task3"]
        == 1
    )


def test_strict_outputs_counts_what_did_not_reproduce_or_was_cleared(exercise):
    nb = copy.deepcopy(exercise.reference)
    cid3, _ = check_cell(exercise, 3)
    cid2, _ = check_cell(exercise, 2)
    for cell in nb.cells:
        if cell.get("id") == cid2:
            cell.outputs = []  # task 2 handed in without outputs
    prepared = grading.prepare(nb, exercise)
    a = honest_answers(exercise)
    answers = {
        cid3: exported(reduction=a["reduction"]),
        cid2: exported(distilbert_count=a["distilbert_count"], bert_count=a["bert_count"]),
    }
    run = passed_run(prepared, exercise, answers)
    solution3 = next(cid for cid in exercise.tasks[2].cells if cid != cid3)  # task 3's solution cell
    index3 = [c.get("id") for c in prepared.nb.cells if c.cell_type == "code"].index(solution3)
    run["results"][index3].update(outcome="failed", message="Cell outputs differ", stored="old", rerun="new")
    lenient = grading.score_run(prepared, exercise, run, grading.Limits())
    strict = grading.score_run(prepared, exercise, run, grading.Limits(), strict_outputs=True)
    assert lenient.marks["task3"] == lenient.marks["task2"] == 1
    assert lenient.outputs["task2"] == NOT_STORED and lenient.outputs["task3"].startswith("differs: cell")
    assert lenient.outputs["task1"] == REPRODUCED
    assert strict.marks["task3"] == strict.marks["task2"] == 0
    assert any("--strict-outputs" in p for p in strict.problems)


# ------------------------------------------------------------------ a class: roster, Canvas, feedback


def rows(exercise):
    marks = {t.name: 1 for t in exercise.graded}
    full = len(exercise.graded)
    return [
        grading.Row("class/alice_exercise.ipynb", "graded", full, full, dict(marks), ""),
        grading.Row(
            "class/bob.ipynb",
            "graded",
            full - 1,
            full,
            {**marks, "task3": 0},
            "task3: ✗ Task 3 (the reduction): not the reduction yet",
            feedback={"task3": ["✗ Task 3 (the reduction): not the reduction yet (hint: keeps)"]},
        ),
        grading.Row("class/bob-late.ipynb", "graded", 0, full, dict.fromkeys(marks, 0), ""),
        grading.Row("class/zed.ipynb", "invalid", None, full, dict.fromkeys(marks), "empty file"),
    ]


def roster_file(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text(
        "ID,Name,canvas_id,section\nalice,Alice A,101,A\nbob,Bob B,102,A\ncarol,Carol C,103,B\n", encoding="utf-8"
    )
    return path


def test_roster_gives_ids_and_says_who_is_missing_or_twice(tmp_path, exercise):
    roster = grading.read_roster(roster_file(tmp_path))
    found = {(r.student, r.submission): r for r in grading.apply_roster(rows(exercise), exercise, roster)}
    assert found[("alice", "class/alice_exercise.ipynb")].detail == ""
    assert found[("bob", "class/bob.ipynb")].detail.startswith("duplicate: bob also handed in bob-late.ipynb")
    assert found[("carol", "")].status == "missing"
    assert found[("zed", "class/zed.ipynb")].detail.startswith("not on the roster")
    with pytest.raises(ValueError, match="group named id"):
        grading.apply_roster(rows(exercise), exercise, roster, pattern=r"^\w+")
    bad = tmp_path / "bad.csv"
    bad.write_text("name\nAlice\n", encoding="utf-8")
    with pytest.raises(ValueError, match="needs an 'id' column"):
        grading.read_roster(bad)


def test_canvas_import_lists_the_roster_with_the_best_score(tmp_path, exercise):
    roster = grading.read_roster(roster_file(tmp_path))
    graded = grading.apply_roster(rows(exercise), exercise, roster)
    out = tmp_path / "canvas.csv"
    grading.write_canvas(graded, roster, "DistilBERT exercise (77)", out)
    lines = list(csv.reader(out.open(encoding="utf-8")))
    full = len(exercise.graded)
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "DistilBERT exercise (77)"]
    assert lines[1][0] == "Points Possible" and lines[1][-1] == str(full)
    assert lines[2:] == [
        ["Alice A", "101", "alice", "", "A", str(full)],
        ["Bob B", "102", "bob", "", "A", str(full - 1)],
        ["Carol C", "103", "carol", "", "B", ""],
    ]
    with pytest.raises(ValueError, match="--force"):
        grading.write_canvas(graded, roster, "x (1)", out)


def test_feedback_files_say_what_each_task_got(tmp_path, exercise):
    written = grading.write_feedback(rows(exercise), exercise, tmp_path / "feedback")
    assert [p.name for p in written] == ["alice_exercise.md", "bob.md", "bob-late.md", "zed.md"]
    bob = (tmp_path / "feedback" / "bob.md").read_text(encoding="utf-8")
    assert f"Score: **{len(exercise.graded) - 1} of {len(exercise.graded)}**" in bob
    assert "## task3: How many fewer?" in bob and "(hint: keeps)" in bob
    assert "could not grade this file: empty file" in (tmp_path / "feedback" / "zed.md").read_text(encoding="utf-8")
    table = grading.summary(rows(exercise), exercise)
    assert "1 × task3: ✗ Task 3 (the reduction): not the reduction yet" in table


def test_every_file_of_the_package_is_watched(monkeypatch):
    """Every file of the package is compared, not only checks.py."""
    from bertfamily.grading.fingerprints import package_changes, package_files

    started = package_files()
    assert "quantization.py" in started and "configs/bert-base-uncased.json" in started
    assert package_changes(started) == []
    assert package_changes({**started, "quantization.py": "0" * 64}) == ["quantization.py"]


def test_a_stand_in_model_with_a_copied_configuration_is_refused():
    """A fake DistilBertModel carrying the published configuration and a few tiny layers is not the
    model that configuration describes: the grader counts the values the kernel's model holds."""
    from bertfamily import budget
    from bertfamily.models import published_config

    config = published_config("distilbert-base-uncased")
    settings = {k: v for k, v in config.to_dict().items() if v is None or isinstance(v, (bool, int, float, str))}
    fake = {
        "module": "DistilBertModel",
        "object": 1,
        "config": settings,
        "values": 36 * 2,
        "linear": 0,
        "dynamic": ["qint8"] * 36,
    }
    ok, why = verify.recheck("ok = checks.check_models(distilbert, distilbert)", {"distilbert": fake})
    assert not ok and "not a real model of that configuration" in why
    real = {**fake, "values": budget.count(config)}
    assert verify._not_its_configuration(real) is None


def test_answers_typed_as_numbers_earn_nothing(exercise):
    """Right values, typed rather than computed: the tasks whose checks read them get no mark, and the
    row says why; the same values computed keep their marks."""
    from bertfamily import checks

    distil, bert = checks.expected_counts()
    want = checks.predicted_file_bytes()
    fp32, int8 = want["fp32"] + 30_000, want["int8"] + 30_000
    nb = copy.deepcopy(exercise.reference)
    ids = {
        t.name: next(
            c for c in t.cells if "solution" in {x.id: x for x in exercise.reference.cells}[c].metadata.get("tags", [])
        )
        for t in exercise.tasks
    }
    by_id = {c.get("id"): c for c in nb.cells}
    by_id[ids["task2"]].source = f'distilbert_count = int("{distil}")\nbert_count = {bert:_}'
    by_id[ids["task6"]].source = f"fp32_bytes, int8_bytes = {fp32}, [{int8}][0]"
    prepared = grading.prepare(nb, exercise)
    answers = {cid: exported(distilbert_count=distil, bert_count=bert) for cid, _ in exercise.tasks[1].checks}
    answers |= {cid: exported(fp32_bytes=fp32, int8_bytes=int8) for cid, _ in exercise.tasks[5].checks}
    answers |= {
        cid: exported(
            kept_fp32=checks.kept_in_fp32(),
            int8_predicted_bytes=want["int8"],
            int8_bytes=int8,
            explanation="the tables stay fp32",
        )
        for cid, _ in exercise.tasks[6].checks
    }
    score = grading.score_run(prepared, exercise, passed_run(prepared, exercise, answers), grading.Limits())
    assert score.marks["task2"] == score.marks["task6"] == score.marks["task7"] == 0
    assert "task2: `distilbert_count` typed as a number" in "; ".join(score.flags)
    assert any("`int8_bytes` is typed as a number" in p for p in score.problems if p.startswith("task7"))
    honest = grading.prepare(copy.deepcopy(exercise.reference), exercise)
    kept = grading.score_run(honest, exercise, passed_run(honest, exercise, answers), grading.Limits())
    assert kept.marks["task2"] == kept.marks["task6"] == kept.marks["task7"] == 1


def test_code_too_deep_to_parse_is_said_not_a_crash(exercise):
    """A cell of 3,000 additions makes Python's parser recurse too deep: the grader says it could not
    read it (for the instructor) and scores the run as usual. (No kernel: IPython itself takes minutes
    over such a cell, which would cost the student a timeout, not the class its gradebook.)"""
    from bertfamily.grading import integrity

    nb = copy.deepcopy(exercise.reference)
    nb.cells.insert(3, nbformat.v4.new_code_cell("x = " + "+".join(["1"] * 3000)))
    prepared = grading.prepare(nb, exercise)
    said = integrity.suspicious(prepared.nb, exercise)
    assert any("cannot be read by the grader (nested too deeply)" in s for s in said), said
    assert causes.typed_answers(prepared.nb, exercise, {"reduction"}) == {}


def test_a_measured_size_must_be_a_file_the_run_wrote(exercise):
    """Task 6's sizes, right to the byte but held by no file of the run (computed from the counts, say):
    no mark, and a flag; the same sizes with the files there keep the mark."""
    from bertfamily import checks

    want = checks.predicted_file_bytes()
    fp32, int8 = want["fp32"] + 30_000, want["int8"] + 30_000
    prepared = grading.prepare(copy.deepcopy(exercise.reference), exercise)
    answers = {cid: exported(fp32_bytes=fp32, int8_bytes=int8) for cid, _ in exercise.tasks[5].checks}
    nothing = grading.score_run(prepared, exercise, passed_run(prepared, exercise, answers, sizes=[]), grading.Limits())
    assert nothing.marks["task6"] == 0
    assert "task6: `fp32_bytes` is not the size of a file the run wrote" in nothing.flags
    assert any("is not the size of any file the run wrote" in p for p in nothing.problems if p.startswith("task6"))
    files = grading.score_run(
        prepared, exercise, passed_run(prepared, exercise, answers, sizes=[fp32, int8]), grading.Limits()
    )
    assert files.marks["task6"] == 1 and not any("size of" in f for f in files.flags)
    run = passed_run(prepared, exercise, answers, sizes=[fp32, int8])
    run["results"][0]["unsaved"] = [fp32]  # red team round 9 (R9-2): random bytes of that length, no saved model
    random = grading.score_run(prepared, exercise, run, grading.Limits())
    assert random.marks["task6"] == 1  # a flag to read, not a mark lost
    assert [f for f in random.flags if "size of" in f] == [
        f"task6: `fp32_bytes` ({fp32:,}) is the size of a file that is no model torch.save or safetensors wrote "
        "(pickle.dump? raw bytes?): read by hand"
    ]


def test_a_run_stopped_in_a_task_says_why_and_never_that_no_mark_was_lost(exercise):
    """A cell that runs past the per-cell limit stops the run there (nbval): its task's check never ran, so
    the task has no mark, and its row says the cell ran past the limit, not "its checks passed: no mark
    lost" (as a class on a loaded machine showed: a slow model load in task 1, every row 0 with that note)."""
    prepared = grading.prepare(copy.deepcopy(exercise.reference), exercise)
    run = passed_run(prepared, exercise, {})
    code = [i for i, c in enumerate(prepared.nb.cells) if c.cell_type == "code"]
    check, _ = check_cell(exercise, 1)
    stop = next(n for n, i in enumerate(code) if prepared.nb.cells[i].get("id") == check) - 1  # task 1's solution
    run["results"] = {n: entry for n, entry in run["results"].items() if n <= stop}
    run["results"][stop].update(outcome="failed", message="Timeout: cell execution exceeded 120 s")
    score = grading.score_run(prepared, exercise, run, grading.Limits())
    assert score.status == "timeout" and score.marks["task1"] == 0
    assert not any("no mark lost" in note for note in score.notes), score.notes
    assert any(
        p.startswith(f"task1: cell {code[stop]}") and "ran past the per-cell limit of 120 s" in p
        for p in score.problems
    ), score.problems


def test_a_checks_two_hints_stay_apart():
    """The lecturer, round 5 (P7): two hints of one check read as one run-on sentence in the feedback and the
    self-check ("... 2**20 bytes `int8_mib` is in MB ...")."""
    from bertfamily.grading.marks import report

    text = "✗ Task 4 (predicted sizes): not yet\n  hint: `fp32_mib` is in MB\n  hint: `int8_mib` is in MB\n"
    cell = nbformat.v4.new_code_cell("checks.check_predicted_sizes(fp32_mib, int8_mib)")
    cell.metadata["tags"] = ["check"]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    (result,) = report(nbformat.v4.new_notebook(cells=[cell]))
    assert result.hint == "`fp32_mib` is in MB · `int8_mib` is in MB"
