"""Regrading a class (bertfamily.grading: the gradebook).

Fast tests cover reading, preparing and the command line without a kernel. The integration tests
read the rows of the class that test_grading_kinds.py plants and grades once (:func:`graded_tiny`: the
small exercise made for the tests, its model answer spoiled in one way each); a serial run of a
subset must give the same rows. Two full runs of the course's own exercise (its solution notebook and
the model answer) show that the real exercise gets full marks.
"""

import copy
import csv
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from grading_class import GRADED, MEMORY_MIB, SANITIZE, TINY, added, row, tiny
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from bertfamily import grading
from bertfamily.grading import sandbox
from bertfamily.grading.standins import KERNEL

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"
#: The correct exercise peaks near 1.3 GiB (kernel and grader).


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
    return grading.student_version(
        new_notebook(
            cells=[
                new_markdown_cell("```{exercise} Add\n:label: ex-add\nCompute x.\n```"),
                new_code_cell("x = 1 + 1", metadata={"tags": ["solution"]}),
                new_code_cell("print('✓ Task 1 (add)' if x == 2 else '✗ Task 1 (add)')", metadata={"tags": ["check"]}),
            ]
        )
    )


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "empty file"),
        (b"  \n", "empty file"),
        (b'{"cells": [', "invalid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[1, 2]", "nbformat"),
        (b'{"nbformat": 3, "worksheets": []}', "nbformat"),
        (b'{"nbformat": 4, "nbformat_minor": 5, "cells": "none", "metadata": {}}', "not a valid notebook"),
        (nbformat.writes(other_assignment()).encode(), "not this exercise"),
    ],
)
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
    setup = next(
        c
        for c in exercise.reference.cells
        if "nbval-ignore-output" in c.metadata.get("tags", [])
        and "check" not in c.metadata.get("tags", [])
        and "solution" not in c.metadata.get("tags", [])
    )
    assert "nbval-ignore-output" in by_id[setup.id].metadata["tags"]  # the reference's own tag stays
    timing = next(t for t in exercise.tasks if not t.graded)
    assert all("nbval-skip" in by_id[cid].metadata["tags"] for cid, _ in timing.checks)
    others = [cid for cid in timing.cells if cid not in dict(timing.checks)]
    assert others and all(
        {"nbval-ignore-output", "raises-exception"} <= set(by_id[cid].metadata["tags"]) for cid in others
    )
    assert nbformat.writes(nb) != nbformat.writes(prepared)  # a copy: nb keeps its tags
    assert "nbval-ignore-output" in solution.metadata["tags"]


def test_place_dependent_outputs_are_not_compared():
    out = [
        nbformat.v4.new_output("stream", name="stderr", text="a warning\n"),
        nbformat.v4.new_output(
            "display_data", data={"application/vnd.jupyter.widget-view+json": {}, "text/plain": "Loading weights: 100%"}
        ),
        nbformat.v4.new_output("stream", name="stdout", text="DistilBERT 66,362,880 parameters\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>"}),
    ]
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

    patterns = get_sanitize_patterns(grading.sanitizers(SANITIZE))
    assert patterns[0] == grading.MODEL_SOURCE

    def clean(s):
        for regex, replace in patterns:
            s = re.sub(regex, replace, s)
        return s

    offline = (
        "no model hub here: built distilbert-base-uncased from its published configuration with "
        "random weights (parameter counts and file sizes are exact, predictions are meaningless)\n"
    )
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
    nb = new_notebook(
        cells=[
            new_code_cell(
                "import os\nprint(os.environ.get('HF_TOKEN'), os.environ['HF_HUB_OFFLINE'])\n"
                f"print(os.listdir('.'), os.getcwd() != {str(tmp_path)!r})"
            )
        ]
    )
    run = grading.run_sandboxed(nb, grading.Limits(cell_timeout=60, timeout=120), "")
    assert run["status"] == "" and run["exit_code"] == 0, run["log"]
    assert run["results"][0]["outputs"][0]["text"] == "None 1\n['submission.ipynb'] True\n"
    assert list(tmp_path.iterdir()) == []


def test_cli_bad_input(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "gradebook.csv"
    reference = ["--reference", str(EXERCISE)]
    cases = [
        ([str(tmp_path / "missing.ipynb")], "no such file"),
        ([str(tmp_path / "empty")], "nothing to grade"),
        ([str(EXERCISE), "--jobs", "0"], "at least 1"),
        ([str(EXERCISE), "--memory-mib", "0"], "positive"),
    ]
    for args, message in cases:
        assert grading.main([*args, "--out", str(out), *reference]) == 2
        assert message in capsys.readouterr().err
    submission = tmp_path / "sub.ipynb"
    submission.write_bytes(b"{}")
    assert grading.main([str(submission), "--out", str(submission), "--force", *reference]) == 2
    assert "is one of the submissions" in capsys.readouterr().err
    out.write_text("my marks\n")
    assert grading.main([str(submission), "--out", str(out), *reference]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == "my marks\n" and submission.read_bytes() == b"{}"
    assert grading.main([str(submission), "--out", str(tmp_path / "no" / "g.csv"), *reference]) == 2
    with pytest.raises(SystemExit):
        grading.main([str(submission)])  # --out is required
    assert not out.exists() or out.read_text() == "my marks\n"


def test_write_gradebook_is_atomic_and_refuses_to_overwrite(tmp_path, exercise):
    out = tmp_path / "g.csv"
    row = grading.Row(
        "a.ipynb", "invalid", None, len(exercise.graded), dict.fromkeys(t.name for t in exercise.graded), "empty file"
    )
    grading.write_gradebook([row], exercise, out)
    first = out.read_text()
    with pytest.raises(ValueError, match="--force"):
        grading.write_gradebook([], exercise, out)
    assert out.read_text() == first
    grading.write_gradebook([], exercise, out, force=True)
    assert out.read_text().splitlines() == [",".join(grading.gradebook_fields(exercise))]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.csv"]  # no temporary file left behind


# ------------------------------------------------------------------ the planted class (test_grading_kinds.py)


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_rows_are_sorted_and_complete(graded_tiny):
    handed = [r["submission"] for r in graded_tiny["rows"] if r["submission"]]
    assert handed == sorted(handed)
    klass = Path(graded_tiny["class"])
    assert set(handed) == {str(p) for p in klass.rglob("*.ipynb")}
    assert [r["student"] for r in graded_tiny["rows"] if not r["submission"]] == ["dora"]


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_an_edited_check_cell_is_restored_and_noted(graded_tiny):
    r = row(graded_tiny, "check_edited")
    assert (r["status"], r["score"]) == ("graded", str(GRADED)), r
    assert r["detail"].startswith("task3: its check cell") and "restored" in r["detail"], r["detail"]


@pytest.mark.parametrize("name", ["correct", "online"])
@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_full_marks(graded_tiny, name):
    """The model answer, and the same run online (a progress widget and stderr lines stored)."""
    r = row(graded_tiny, name)
    assert (r["status"], r["score"], r["max_score"], r["detail"]) == ("graded", str(GRADED), str(GRADED), ""), r
    assert {r[f"task{n}"] for n in (1, 2, 3, 5)} == {"1"} and r["outputs"] == "reproduced" and r["flags"] == ""
    assert r["read_by_hand"] == "task1: the sum of 0 to 9 is 45, less 3"


@pytest.mark.parametrize(
    "name, note",
    [
        ("no_ids", "the notebook has no cell ids (saved by an older editor)"),
        ("check_deleted", "task3: its check cell was deleted; the course's copy was put back and run"),
        ("cleared", ""),
    ],
)
@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_full_marks_after_an_accident(graded_tiny, name, note):
    """An honest student loses nothing for an editor, a deleted check cell or cleared outputs."""
    r = row(graded_tiny, name)
    assert (r["status"], r["score"], r["flags"]) == ("graded", str(GRADED), ""), r
    assert note in r["detail"] and "✗" not in r["detail"], r["detail"]
    if name == "cleared":  # graded from the re-run; nothing stored to compare
        assert r["outputs"].count("not checked: handed in without outputs") == GRADED


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_an_output_typed_by_hand_is_reported_not_scored(graded_tiny):
    """The mark comes from the re-run; the stored output that does not reproduce is said beside it."""
    r = row(graded_tiny, "edited_output")
    assert (r["status"], r["score"], r["detail"]) == ("graded", str(GRADED), ""), r
    assert r["outputs"].startswith("task1: differs: cell") and "'41'" in r["outputs"] and "'42'" in r["outputs"]


@pytest.mark.parametrize(
    "name, said", [("cheat_check", "replaces bertfamily.checks.check_reduction"), ("cheat_print", "imports builtins")]
)
@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_a_two_line_cheat_gains_nothing_and_is_flagged(graded_tiny, name, said):
    """A check replaced or print patched in the kernel changes nothing: the grader's check of the
    answer sent says ✗; the code that tried, and the typed 0.5, are flagged for the instructor."""
    r = row(graded_tiny, name)
    assert r["status"] == "graded" and r["score"] == str(GRADED - 1), r
    assert [t for t in ("task1", "task2", "task3", "task5") if r[t] == "0"] == ["task3"]
    assert "task3: ✗ Task 3 (the reduction): not the reduction yet" in r["detail"]
    assert said in r["flags"] and "task3: `reduction` typed as a number" in r["flags"], r["flags"]


@pytest.mark.parametrize(
    "name, task, words",
    [
        ("wrong_answer", "task3", ["task3: ✗ Task 3 (the reduction)"]),
        ("syntax_error", "task2", ["task2: cell", "raised SyntaxError"]),
    ],
)
@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_one_task_lost(graded_tiny, name, task, words):
    r = row(graded_tiny, name)
    assert r["status"] == "graded" and r["score"] == str(GRADED - 1), r
    assert [t for t in ("task1", "task2", "task3", "task5") if r[t] == "0"] == [task]
    for word in words:
        assert word in r["detail"], r["detail"]
    assert all(part.startswith(f"{task}:") for part in r["detail"].split("; ")), r["detail"]


@pytest.mark.parametrize(
    "name, status, words",
    [
        ("memory_hog", "error", [f"out of memory: the run used more than {MEMORY_MIB} MiB", "(in cell"]),
        ("vandal", "error", ["the kernel died", "(in cell"]),
        ("invalid_json", "invalid", ["not a notebook: invalid JSON"]),
        ("other_assignment", "invalid", ["not this exercise"]),
        ("empty", "invalid", ["empty file"]),
    ],
)
@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_broken_submissions(graded_tiny, name, status, words):
    r = row(graded_tiny, name)
    assert r["status"] == status, r
    for word in words:
        assert word in r["detail"], r["detail"]
    marks = {r[t] for t in ("task1", "task2", "task3", "task5")}
    if status == "invalid":
        assert r["score"] == "" and marks == {""}
    else:  # stopped in task 1: nothing after it ran
        assert r["score"] == "0" and marks == {"0"}
        nb = nbformat.read(Path(graded_tiny["class"]) / f"{name}.ipynb", as_version=4)
        index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "s1")
        assert f"(in cell {index})" in r["detail"]


@pytest.fixture(scope="module")
def loop_row(tmp_path_factory):
    """An infinite loop in a cell the student added at the top, under a short per-cell limit."""
    folder = tmp_path_factory.mktemp("loop")
    nbformat.write(added(grading.model_answer(tiny().reference), "while True:\n    pass"), folder / "loop.ipynb")
    limits = grading.Limits(cell_timeout=5, timeout=300, memory_mib=MEMORY_MIB)
    (r,) = grading.grade_class([folder], tiny(), limits, jobs=1, progress=False)
    return r


def test_infinite_loop_times_out(loop_row):
    """The run stops at the loop: nothing after it is graded."""
    assert (loop_row.status, loop_row.score) == ("timeout", 0), loop_row
    assert set(loop_row.tasks.values()) == {0}
    assert loop_row.detail == (
        "not in a task: cell 1 (the cell that starts `while True:`) ran past the per-cell limit of 5 s"
    )


def snapshot(folder):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(Path(folder).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def serial(graded_tiny, tmp_path_factory):
    """The command line, one job, no roster, on a subset given in reverse order: a correct, a failing,
    the invalid ones."""
    names = ["correct", "memory_hog", "invalid_json", "empty", "other_assignment"]
    klass = Path(graded_tiny["class"])
    out = tmp_path_factory.mktemp("gradebook") / "gradebook.csv"
    args = [str(klass / f"{n}.ipynb") for n in reversed(names)]
    args += [
        "--out",
        str(out),
        "--jobs",
        "1",
        "--memory-mib",
        str(MEMORY_MIB),
        "--cell-timeout",
        "120",
        "--timeout",
        "300",
        "--disk-mib",
        "64",
        "--reference",
        str(TINY),
        "--sanitize",
        str(SANITIZE),
    ]
    before = snapshot(klass)
    return names, out, args, grading.main(args), before


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_serial_gradebook_matches_parallel(serial, graded_tiny, capfd):
    names, out, args, code, before = serial
    assert code == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == grading.gradebook_fields(tiny())
    assert [Path(r["submission"]).stem for r in rows] == sorted(names)
    for r in rows:
        shared = dict(row(graded_tiny, Path(r["submission"]).stem))
        for with_roster in ("student", "submitted", "time_from", "late", "counts"):  # the class had a roster
            shared.pop(with_roster, None)
        assert r == shared
    assert snapshot(Path(graded_tiny["class"])) == before  # the submitted files are only read
    # an existing gradebook is not overwritten without --force
    written = out.read_bytes()
    assert grading.main(args) == 2
    assert "--force" in capfd.readouterr().err
    assert out.read_bytes() == written


def test_cli_prints_progress_and_summary(tmp_path, capsys):
    """A folder of submissions that need no kernel, then --force over the gradebook."""
    out = tmp_path / "g.csv"
    out.write_text("old\n")
    folder = tmp_path / "cheap"
    folder.mkdir()
    (folder / "empty.ipynb").write_bytes(b"")
    (folder / "invalid_json.ipynb").write_text('{"cells": [', encoding="utf-8")
    assert grading.main([str(folder), "--out", str(out), "--force", "--jobs", "2", "--reference", str(TINY)]) == 0
    captured = capsys.readouterr()
    assert "grading" in captured.err and "2/2" in captured.err  # the progress bar
    assert "2 submissions: 2 invalid" in captured.out
    for t in tiny().graded:  # one line a task, its name padded to the longest
        assert re.search(rf"^{t.name} +0/0  {re.escape(t.title)}$", captured.out, re.MULTILINE), t.name
    assert out.read_text().count("\n") == 3


def test_readme_states_the_command_and_defaults():
    """The instructors' manual names the command, every status, and the limits the code defaults to."""
    manual = (ROOT / "docs" / "INSTRUCTORS.md").read_text(encoding="utf-8")
    section = manual[manual.index("## Regrading a class") :]
    limits = grading.Limits()
    for words in [
        "bertfamily-grade",
        "--out gradebook.csv",
        "--force",
        "--jobs",
        "`--reference SOLUTION.ipynb` (required",
        "--reference book/exercise_distilbert.ipynb",
        "--sanitize tests/sanitize.cfg",
        f"`--cell-timeout` (default {limits.cell_timeout:g} s)",
        f"`--timeout` ({limits.timeout:g} s)",
        f"`--memory-mib`, default {limits.memory_mib} MiB",
        "--network none",
        *(f"| `{s}` |" for s in grading.STATUSES),
    ]:
        assert words in section, words


def test_unsafe_mode_runs_bare_and_still_without_the_answer_key(tmp_path, monkeypatch):
    """--unsafe-no-sandbox: the kernel runs as the grader (no bubblewrap), but still imports the run's copy
    of the package, whose checks hold no expected values."""
    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(tmp_path))
    nb = new_notebook(
        cells=[
            new_code_cell(
                "import os\nfrom bertfamily import checks\ntry:\n    checks.expected_counts()\n"
                "except AttributeError as e:\n"
                f"    print('no key:', 'answer key' in str(e))\nprint(os.getuid() == {os.getuid()})"
            )
        ]
    )
    run = grading.run_sandboxed(nb, grading.Limits(cell_timeout=60, timeout=120, sandbox=False), "")
    assert run["status"] == "" and run["exit_code"] == 0, run["log"]
    assert run["results"][0]["outputs"][0]["text"] == "no key: True\nTrue\n"
    assert list(tmp_path.iterdir()) == []


def test_run_folders_of_graders_that_are_gone_are_swept(tmp_path):
    """A grading worker killed mid-run leaves its run's folder; the next run removes it, never a live one."""
    dead = 2**22 + 12345  # above any pid this machine hands out (pid_max is at most 2**22)
    (tmp_path / f"bertfamily-grade-{dead}-abc" / "home").mkdir(parents=True)
    (tmp_path / f"bertfamily-grade-{os.getpid()}-abc").mkdir()
    (tmp_path / "unrelated").mkdir()
    sandbox.sweep_leftovers(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"bertfamily-grade-{os.getpid()}-abc", "unrelated"]


def _is_kernel(process) -> bool:
    import psutil

    try:
        # the kernel's own command line (python -m KERNEL ...): not a launcher caught as it becomes bwrap, whose
        # arguments name the kernel while its name is still python's
        return process.name() != "bwrap" and process.cmdline()[1:3] == ["-m", KERNEL]
    except psutil.Error:  # gone, or a zombie, between the listing and the look
        return False


def test_a_pools_task_runs_in_the_environment_of_the_process_that_asked(monkeypatch):
    """A pool's workers are forked from a server that may have started with an earlier pool's environment:
    each task carries the asking process's (BERTFAMILY_GRADE_TMP, the kernel's variables), as spawn gave."""
    import multiprocessing

    from bertfamily.grading import classroom

    seen = {}
    monkeypatch.setattr(os, "environ", {**os.environ, "LEFT_OVER": "1"})
    monkeypatch.setattr(classroom, "grade_submission", lambda *args: seen.update(os.environ) or args)
    assert classroom._grade_one(("a.ipynb",), {"ONLY": "this"}) == ("a.ipynb",) and seen == {"ONLY": "this"}
    assert classroom._context(fork_server=False).get_start_method() == "spawn"  # the API's default
    if "forkserver" in multiprocessing.get_all_start_methods():  # the command line's
        assert classroom._context(fork_server=True).get_start_method() == "forkserver"


def test_a_pool_worker_or_fork_server_whose_grader_is_gone_ends_at_once():
    """The ties to the grader are made after the process starts: a worker (monitor.die_with) or a fork server
    (grading.preload) that finds its grader already gone ends, instead of waiting on its tasks forever."""
    import subprocess
    import sys

    gone = subprocess.Popen(["true"])
    gone.wait()
    code = f"from bertfamily.grading.monitor import die_with; die_with({gone.pid}); print('left running')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, ""), done
    from bertfamily.grading.classroom import GRADER_PID

    env = {**os.environ, GRADER_PID: str(gone.pid)}  # not this server's parent: its grader is gone
    code = "import sys, bertfamily.grading.preload; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert (done.returncode, done.stdout) == (0, ""), done


@pytest.mark.sandbox
def test_a_grader_killed_as_its_pool_starts_leaves_no_process_behind(tmp_path):
    """SIGKILL to ``bertfamily-grade`` the moment its fork server appears, before the server has imported
    anything (the red team's round 11 left the server, a worker and the resource tracker running so)."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    klass = tmp_path / "class"
    klass.mkdir()
    for n in range(2):
        nbformat.write(
            added(grading.model_answer(tiny().reference), "import time\ntime.sleep(60)"), klass / f"s{n}.ipynb"
        )
    env = {**os.environ, "BERTFAMILY_GRADE_TMP": str(tmp_path)}
    command = [sys.executable, "-m", "bertfamily.grading", str(klass), "--out", str(tmp_path / "g.csv")]
    grader = subprocess.Popen(
        [*command, "--jobs", "2", "--reference", str(TINY)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, server = time.monotonic() + 120, None
        while time.monotonic() < deadline and server is None and grader.poll() is None:
            family = psutil.Process(grader.pid).children(recursive=True)
            server = next((p for p in family if "multiprocessing.forkserver" in " ".join(_cmdline(p))), None)
            time.sleep(0.01)
        assert server is not None, "the fork server never started"
        family = psutil.Process(grader.pid).children(recursive=True)
        # the server's socket folder is the grader's own, which a later grader sweeps (not Python's /tmp/pymp-*)
        folders = list(Path("/tmp").glob(f"bfg-{grader.pid}-pymp-*"))
        assert folders, "the fork server's folder is not named for its grader"
        grader.send_signal(signal.SIGKILL)
        grader.wait()
        time.sleep(5)  # what the server forked in the meantime is its child: counted below
        family += [c for p in family for c in _children(p)]
        left = _left_running(set(family))
        assert not left, left
        sandbox.sweep_leftovers(tmp_path)  # (or another test's grader did, once this one was gone)
        assert not [f for f in folders if f.exists()]
    finally:
        if grader.poll() is None:
            grader.kill()


def _left_running(family) -> list[str]:
    """The command lines of ``family`` still running 20 s on (each then killed: nothing is left spinning on
    the machine when a test fails)."""
    import contextlib

    import psutil

    _, alive = psutil.wait_procs(family, timeout=20)
    left = [" ".join(_cmdline(p))[:120] for p in alive]
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return left


def _cmdline(process) -> list[str]:
    import psutil

    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _children(process) -> list:
    import psutil

    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


@pytest.mark.sandbox
def test_a_grader_killed_mid_class_leaves_no_process_behind(tmp_path):
    """SIGKILL to ``bertfamily-grade`` while two kernels run: its pool workers, their nbval workers and
    the sandboxed kernels all end (Linux's parent-death signal, bwrap's --die-with-parent), instead of
    grading on as orphans."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    klass = tmp_path / "class"
    klass.mkdir()
    for n in range(2):
        nbformat.write(added(grading.model_answer(tiny().reference), "while True:\n    pass"), klass / f"loop{n}.ipynb")
    env = {**os.environ, "BERTFAMILY_GRADE_TMP": str(tmp_path)}
    command = "import sys; from bertfamily.grading import main; sys.exit(main(sys.argv[1:]))"
    grader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            command,
            str(klass),
            "--out",
            str(tmp_path / "gradebook.csv"),
            "--jobs",
            "2",
            "--memory-mib",
            str(MEMORY_MIB),
            "--reference",
            str(TINY),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, kernels = time.monotonic() + 120, []
        while time.monotonic() < deadline and len(kernels) < 2:
            time.sleep(0.5)
            family = psutil.Process(grader.pid).children(recursive=True)
            kernels = [p for p in family if _is_kernel(p)]
        assert len(kernels) == 2, "the two kernels never started"
        family = psutil.Process(grader.pid).children(recursive=True)
        # the server's socket folder is the grader's own, which a later grader sweeps (not Python's /tmp/pymp-*)
        folders = list(Path("/tmp").glob(f"bfg-{grader.pid}-pymp-*"))
        assert folders, "the fork server's folder is not named for its grader"
        grader.send_signal(signal.SIGKILL)
        grader.wait()
        left = _left_running(family)
        assert not left, left
    finally:
        if grader.poll() is None:
            grader.kill()
