"""The student-version generator and the regrade (bertfamily.grading).

Fast tests use a small hand-made notebook; the integration tests generate the student version of
book/exercise_distilbert.ipynb and run it with its placeholders (every check fails with a hint, no
traceback), on a copy; with the solutions put back it is the reference's code, which nbval and
test_gradebook run (the self-check of a filled-in copy runs on the small exercise made for the tests).
"""

import os
import re
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from bertfamily import grading

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"


def tagged(cell, *tags, **metadata):
    cell.metadata["tags"] = list(tags)
    cell.metadata.update(metadata)
    return cell


def small_notebook():
    answer = tagged(
        new_code_cell("# Compute the answer into `x`.\n# (an integer)\nhelper = 20\nx = helper + 22"), "solution"
    )
    answer.outputs = [new_output("stream", name="stdout", text="secret 42\n")]
    answer.execution_count = 2
    return new_notebook(
        cells=[
            new_markdown_cell("# A small exercise"),
            new_code_cell("import sys"),
            new_markdown_cell("```{exercise} Find x\n:label: ex-x\nCompute x.\n```"),
            tagged(new_markdown_cell("```{solution-start} ex-x\n:class: dropdown\n```"), "solution"),
            answer,
            tagged(new_markdown_cell("```{solution-end}\n```"), "solution"),
            tagged(
                new_code_cell("a, (b, c) = 1, (2, 3)\ny: int = 5\nprint(a)"),
                "solution",
                "nbval-ignore-output",
                answers=["y"],
            ),
            tagged(
                new_code_cell("print('✓ Task x: right' if x == 42 else '✗ Task x: not yet\\n  hint: add')"), "check"
            ),
            tagged(new_code_cell("print('done')"), "solution"),
            new_markdown_cell(
                "As {cite}`devlin2019bert, sanh2019distilbert` did.\n\n"
                "```{bibliography}\n:filter: docname in docnames\n```"
            ),
        ]
    )


# ------------------------------------------------------------------ the generator


def test_student_version_replaces_solutions():
    nb = small_notebook()
    before = nbformat.writes(nb)
    student = grading.student_version(nb)
    assert nbformat.writes(nb) == before  # the source is not modified
    sources = [c.source for c in student.cells]
    # solution markdown (the dropdown markup) is gone; the exercise statement is kept, as plain
    # Markdown that Jupyter and Colab show as it is (a heading, then the text; no MyST fences)
    assert not any("solution-start" in s or "solution-end" in s for s in sources)
    assert "### Task 1: Find x\n\nCompute x." in sources
    assert not any("{exercise}" in s or ":label:" in s for s in sources)
    assert (
        "As (devlin2019bert, sanh2019distilbert) did.\n\n(The references are listed on the course's website.)"
    ) in sources
    # the instruction comments are kept, the answer becomes a None placeholder, helpers vanish
    assert (
        "# Compute the answer into `x`.\n# (an integer)\nhelper = None  # YOUR CODE HERE\n"
        "x = None  # YOUR CODE HERE" in sources
    )
    assert "y = None  # YOUR CODE HERE" in sources  # metadata "answers" wins over the assignments
    assert "# YOUR CODE HERE" in sources  # a cell that assigns nothing
    assert "x = helper + 22" not in "".join(sources)
    for cell in student.cells:
        assert "solution" not in cell.metadata.get("tags", [])
        assert "answers" not in cell.metadata
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    check = next(c for c in student.cells if "check" in c.metadata.get("tags", []))
    assert "Task x" in check.source  # checks are kept verbatim, and locked in Jupyter
    assert check.metadata["editable"] is False and check.metadata["deletable"] is False
    assert "editable" not in next(c for c in student.cells if c.source.startswith("y = None")).metadata
    kept = next(c for c in student.cells if c.source.startswith("y = None"))
    assert kept.metadata["tags"] == ["nbval-ignore-output"]


def test_answers_from_assignments():
    cell = new_code_cell("import os\na, (b, c) = 1, (2, 3)\nd: int = 4\ne += 1\nfor f in []: pass\nprint(a)")
    assert grading.answers(cell) == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("bad", ["not a list", ["fine", "not valid"], [3]])
def test_bad_answers_metadata(bad):
    with pytest.raises(ValueError, match="answers"):
        grading.answers(new_code_cell("x = 1", metadata={"answers": bad}))


def test_untagged_solution_markup_is_refused():
    nb = small_notebook()
    nb.cells[3].metadata["tags"] = []  # a forgotten tag on {solution-start}
    with pytest.raises(ValueError, match="not tagged 'solution'"):
        grading.student_version(nb)


def test_write_student_refuses_to_overwrite(tmp_path):
    source, dest = tmp_path / "ex.ipynb", tmp_path / "student" / "ex.ipynb"
    nbformat.write(small_notebook(), source)
    source_bytes, source_mtime = source.read_bytes(), source.stat().st_mtime_ns
    assert grading.write_student(source, dest) == "written"
    text = dest.read_text(encoding="utf-8")
    assert grading.write_student(source, dest) == "unchanged"  # same content: a no-op
    dest.write_text(text.replace("YOUR CODE HERE", "my answer"), encoding="utf-8")
    with pytest.raises(ValueError, match="--force"):
        grading.write_student(source, dest)
    assert "my answer" in dest.read_text(encoding="utf-8")  # the student's work survived
    assert grading.write_student(source, dest, force=True) == "written"
    assert dest.read_text(encoding="utf-8") == text
    with pytest.raises(ValueError, match="solution notebook itself"):
        grading.write_student(source, source, force=True)
    with pytest.raises(ValueError, match="solution notebook itself"):
        grading.write_student(source, tmp_path / "." / "ex.ipynb", force=True)
    assert source.read_bytes() == source_bytes and source.stat().st_mtime_ns == source_mtime


def test_cli_student(tmp_path, capsys):
    source, dest = tmp_path / "ex.ipynb", tmp_path / "out.ipynb"
    nbformat.write(small_notebook(), source)
    assert grading.main(["student", str(source), str(dest)]) == 0
    assert "written" in capsys.readouterr().out
    dest.write_text("{}", encoding="utf-8")
    assert grading.main(["student", str(source), str(dest)]) == 2
    assert "--force" in capsys.readouterr().err
    assert grading.main(["student", str(tmp_path / "missing.ipynb"), str(dest)]) == 2


def test_report_reads_marks_and_errors():
    nb = new_notebook(
        cells=[
            tagged(new_code_cell("..."), "check"),
            tagged(new_code_cell("..."), "check"),
            tagged(new_code_cell("..."), "check"),
            new_code_cell("print('✓ not a check cell: ignored')"),
        ]
    )
    text = "✓ Task 1 (a): fine\n✗ Task 2 (b): no\n  hint: h\n"
    nb.cells[0].outputs = [new_output("stream", name="stdout", text=text)]
    nb.cells[1].outputs = [new_output("error", ename="NameError", evalue="name 'x' is not defined", traceback=[])]
    nb.cells[2].outputs = []
    nb.cells[3].outputs = [new_output("stream", name="stdout", text="✓ not a check cell: ignored\n")]
    results = grading.report(nb)
    assert [(r.task, r.passed) for r in results] == [
        ("Task 1 (a)", True),
        ("Task 2 (b)", False),
        ("cell 1", False),
        ("cell 2", False),
    ]
    assert "NameError" in results[2].message and "no result" in results[3].message
    assert [r.hint for r in results] == ["", "h", "", ""]


def unchanged(path):
    """A snapshot of a file's bytes and modification time."""
    return path.read_bytes(), os.stat(path).st_mtime_ns


def test_grade_runs_a_copy(tmp_path, capsys):
    """grade executes a copy: the graded file keeps its bytes and mtime, and cells run in a temp dir."""
    nb = small_notebook()
    nb.cells.append(
        tagged(
            new_code_cell(
                "import os\nopen('side_effect.txt', 'w').write('x')\n"
                f"print('✓ Task cwd: wrote', os.getcwd() != {str(tmp_path)!r})"
            ),
            "check",
        )
    )
    path = tmp_path / "student.ipynb"
    nbformat.write(grading.student_version(nb), path)
    past = time.time() - 3600
    os.utime(path, (past, past))
    before = unchanged(path)
    results = grading.self_check(path, timeout=60)
    assert unchanged(path) == before
    assert not (tmp_path / "side_effect.txt").exists()
    assert [(r.task, r.passed) for r in results] == [("Task x", False), ("Task cwd", True)]
    assert results[1].message == "wrote True"
    assert grading.main(["self-check", str(path), "--json"]) == 0
    assert '"task": "Task x"' in capsys.readouterr().out
    assert unchanged(path) == before


def test_self_check_past_its_cell_limit_reports_instead_of_a_traceback(tmp_path, capsys):
    """A cell slower than the self-check's limit per cell (a timing loop on a busy laptop) stops the run
    there: the student gets the checks that ran, the cell that stopped it and how to raise the limit,
    and the checks after it as not run, not nbclient's traceback."""
    nb = new_notebook(
        cells=[
            tagged(new_code_cell("print('✓ Task 1 (fast): done')"), "check"),
            new_code_cell("import time\ntime.sleep(60)"),
            tagged(new_code_cell("print('✓ Task 2 (after): done')"), "check"),
        ]
    )
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, path)
    assert grading.main(["self-check", str(path), "--timeout", "3"]) == 0
    out = capsys.readouterr().out
    assert "Traceback" not in out and "✓ Task 1 (fast)" in out, out
    assert "✗ cell 2" in out and "did not run: the run stopped at cell 1" in out, out
    results = grading.self_check(path, timeout=3)
    assert [(r.task, r.passed) for r in results] == [("Task 1 (fast)", True), ("cell 2", False)]


# ------------------------------------------------------------------ the exercise, end to end


@pytest.fixture(scope="module")
def student_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("student") / "exercise_distilbert.ipynb"
    before = unchanged(EXERCISE)
    assert grading.main(["student", str(EXERCISE), str(path)]) == 0
    assert unchanged(EXERCISE) == before
    return path


def check_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and "check" in c.metadata.get("tags", [])]


def test_exercise_student_version_has_no_answers(student_path):
    source = nbformat.read(EXERCISE, as_version=4)
    student = nbformat.read(student_path, as_version=4)
    text = "".join(c.source for c in student.cells)
    for cell in source.cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            code = [
                l
                for l in cell.source.splitlines()
                if l.strip() and not l.lstrip().startswith("#") and len(l.strip()) > 8
            ]  # not a lone bracket of a call written over several lines
            assert code and not any(line in text for line in code if "= None" not in line), code
    assert len(check_cells(student)) == len(check_cells(source)) >= 8
    assert not any(c.get("outputs") for c in student.cells if c.cell_type == "code")


def test_exercise_placeholders_name_only_what_the_task_asks_for(student_path):
    """Each `NAME = None  # YOUR CODE HERE` of the handout is a name the student is asked for: one the
    task's text names or its check reads, never one of the reference's own helpers (task 10 once
    handed out `multilingual_path`, `mib` and `distilbert_saving`, which no task mentions)."""
    cells = nbformat.read(student_path, as_version=4).cells
    asked = []
    for i, cell in enumerate(cells):
        placeholders = re.findall(r"^(\w+) = None  # YOUR CODE HERE$", cell.source, re.M)
        if cell.cell_type != "code" or not placeholders:
            continue
        task = next(c.source for c in reversed(cells[:i]) if c.cell_type == "markdown" and "### Task" in c.source)
        check = next(c.source for c in cells[i + 1 :] if "check" in c.metadata.get("tags", []))
        for name in placeholders:
            asked.append(name)
            assert f"`{name}`" in task or re.search(rf"\b{name}\b", check), (
                f"{name} is handed out as a placeholder, but neither the task's text nor its check names it"
            )
    assert {"multilingual", "multilingual_count", "multilingual_int8_bytes", "multilingual_saving"} <= set(asked)


@pytest.mark.slow
def test_exercise_placeholders_fail_with_hints(student_path):
    before = unchanged(student_path)
    nb = grading.execute_copy(student_path, timeout=300)
    assert unchanged(student_path) == before
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
    for cell in check_cells(nb):
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert text.startswith("✗") and "hint:" in text and "Traceback" not in text, text
    results = grading.report(nb)
    assert len(results) >= 9 and not any(r.passed for r in results)
    assert all(r.message == "no answer yet" and "None" in r.hint for r in results), results


def test_exercise_solutions_put_back_are_the_reference_code(student_path):
    """The student version with the reference solutions put back runs the reference's code, cell for
    cell. (That code passing every graded check is run twice elsewhere: nbval executes the course's
    solution notebook, and test_gradebook grades its model answer in the sandbox.)"""
    reference = nbformat.read(EXERCISE, as_version=4)
    student = nbformat.read(student_path, as_version=4)
    filled = grading.restore_solutions(student, reference)
    code = {c.id: c.source for c in reference.cells if c.cell_type == "code"}
    put_back = {c.id: c.source for c in filled.cells if c.cell_type == "code"}
    assert put_back == code
    assert put_back != {c.id: c.source for c in student.cells if c.cell_type == "code"}  # something was put back


@pytest.mark.slow
def test_solutions_put_back_pass_every_check(tmp_path):
    """The self-check (grading.self_check) on the small exercise made for the tests, its student version with
    the solutions put back: every graded check passes, on a copy."""
    tiny = ROOT / "tests" / "data" / "grading_tiny.ipynb"
    reference = nbformat.read(tiny, as_version=4)
    filled = grading.restore_solutions(grading.student_version(reference), reference)
    path = tmp_path / "filled.ipynb"
    nbformat.write(filled, path)
    before = unchanged(path)
    results = grading.self_check(path, timeout=600)
    assert unchanged(path) == before
    graded = grading.Exercise.load(tiny).graded
    assert len(results) >= len(graded) >= 4
    assert all(r.passed for r in results), [(r.task, r.message) for r in results if not r.passed]


def test_a_self_check_names_the_error_above_that_its_check_stumbled_on():
    """Measured on a class of 6 (lecturer's afternoon): a student who imported lesson 3's calculator saw only
    "✗ cell 21 error NameError: name 'fp32_mib' is not defined" in their self-check, never the ImportError
    that says why; the grader's feedback shows it. The self-check now names it too."""
    import io

    from bertfamily.grading.marks import print_report, report

    def cell(source, ename=None, evalue=None, tags=()):
        c = new_code_cell(source, metadata={"tags": list(tags)} if tags else {})
        c.outputs = [new_output("error", ename=ename, evalue=evalue, traceback=[])] if ename else []
        return c

    nb = new_notebook(
        cells=[
            cell("from bertfamily import budget", "ImportError", "bertfamily.budget is the course's own calculator"),
            cell(
                "ok = checks.check_predicted_sizes(fp32_mib, int8_mib)",
                "NameError",
                "name 'fp32_mib' is not defined",
                tags=["check"],
            ),
            cell("ok = checks.check_file_sizes(a, b)", "NameError", "name 'a' is not defined", tags=["check"]),
        ]
    )
    first, second = report(nb)
    assert not first.passed and "NameError: name 'fp32_mib'" in first.message
    # lecturer round 6: a check cell that raised stands for every check it calls, in the self-check's total
    two = cell(
        "ok = checks.check_file_sizes(a, b)\nok2 = checks.check_int8_prediction(c, d, e)",
        "NameError",
        "x",
        tags=["check"],
    )
    (both,) = report(new_notebook(cells=[two]))
    assert both.checks == 2 and (first.checks, second.checks) == (1, 1)
    printed = io.StringIO()
    print_report([*report(nb), both], printed)
    assert printed.getvalue().splitlines()[-1] == "0/4 checks passed (a self-check, not a grade)"
    assert "(cell 0 above raised ImportError: bertfamily.budget is the course's own calculator)" in first.message
    assert "above" not in second.message  # no student cell raised between the two checks
