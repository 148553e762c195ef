"""The "For instructors" page's recipe, run as written on a tiny class.

The commands of its first section (every ```bash block, in order) run in a folder of links to this
checkout, where a Canvas download (`submissions.zip`) and a Moodle download (`moodle.zip`) of a class
of three were planted with the names the page uses, and the page's own class list (its ```text
block) is `roster.csv`. Then what the page promises is checked: the student version, a gradebook
that finds every student, the Canvas file, the feedback, a regrade of one student, and the Moodle
layout graded with the page's loop and pattern.
"""
from __future__ import annotations

import csv
import re
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest

from bertfamily.grading import sandbox
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.student import model_answer, student_version

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "instructors.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)
LINKED = ("Makefile", ".venv", "book", "lib", "tools", "tests", "pyproject.toml")


def recipe() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Your first class in 10 minutes")
    return text[start:text.index("\n## ", start + 1)]


def blocks(kind: str) -> list[str]:
    return [body for language, body in FENCE.findall(recipe()) if language == kind]


def _options(command: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", command))


def test_the_recipe_has_its_steps_and_uses_only_options_the_grader_has():
    commands = blocks("bash")
    assert [c.split()[0] for c in commands] == ["make", "unzip", ".venv/bin/bertfamily-grade",
                                                ".venv/bin/bertfamily-grade", "unzip",
                                                ".venv/bin/bertfamily-grade"]
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "bertfamily-grade"), "--help"], capture_output=True,
                          text=True, timeout=120)
    known = _options(done.stdout)
    used = set().union(*(_options(c) for c in commands if "bertfamily-grade" in c))
    assert used and used <= known, used - known
    assert len(blocks("text")) == 1 and blocks("text")[0].startswith("id,name,canvas_id,")


def _plant(work: Path, reference) -> None:
    honest, blank = model_answer(reference), student_version(reference)
    with zipfile.ZipFile(work / "submissions.zip", "w") as canvas:  # Canvas: name_[late_]userid_subid_file
        canvas.writestr("lovelaceada_1001_5001_exercise_distilbert.ipynb", nbformat.writes(honest))
        canvas.writestr("smithjane_1002_5002_exercise_distilbert.ipynb", nbformat.writes(blank))
    with zipfile.ZipFile(work / "moodle.zip", "w") as moodle:  # Moodle: a folder per student
        moodle.writestr("Ada Lovelace_1001_assignsubmission_file_/exercise_distilbert.ipynb", nbformat.writes(honest))
        moodle.writestr("Jane Smith_1002_assignsubmission_file_/my exercise.ipynb", nbformat.writes(blank))
    (work / "roster.csv").write_text(blocks("text")[0], encoding="utf-8")


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow  # grades real submissions: left out by make unit
@pytest.mark.sandbox
def test_the_recipe_runs_as_written_on_a_tiny_class(tmp_path):
    if sandbox.sandbox_problem():
        pytest.skip(f"the grader's sandbox is missing: {sandbox.sandbox_problem()}")
    work = tmp_path / "course"
    work.mkdir()
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    exercise = Exercise.load()
    _plant(work, exercise.reference)
    for command in blocks("bash"):
        command = command.replace("\\\n", " ").strip()
        if "bertfamily-grade" in command:
            command += " --jobs 2"  # two at a time, as on this machine's two cores
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=work, capture_output=True,
                              text=True, timeout=1800)
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    graded = len(exercise.graded)
    # 1. hand out: the student version, without solutions
    handed = nbformat.read(work / "student" / "exercise_distilbert.ipynb", as_version=4)
    assert "# YOUR CODE HERE" in "\n".join(c.source for c in handed.cells)
    # 3. grade: every student found, the one who handed in nothing missing
    rows = {r["student"]: r for r in _rows(work / "gradebook.csv")}
    assert set(rows) == {"1001", "1002", "1003"}, rows
    assert (rows["1001"]["status"], rows["1001"]["score"]) == ("graded", str(graded)), rows["1001"]
    assert rows["1001"]["flags"].startswith("copy: the solution cells of task1"), rows["1001"]  # the reference's code
    assert rows["1002"]["status"] == "graded" and int(rows["1002"]["score"]) < graded, rows["1002"]
    assert rows["1003"]["status"] == "missing"
    assert len(list((work / "feedback").glob("*.md"))) == 2
    # 4. upload: Canvas's import file, a row per roster student
    canvas = list(csv.reader(open(work / "canvas.csv", newline="", encoding="utf-8")))
    assert canvas[0][-1] == "DistilBERT exercise (1234)" and canvas[1][0] == "Points Possible"
    scores = {line[2]: line[-1] for line in canvas[2:]}
    assert scores == {"S1001": str(graded), "S1002": rows["1002"]["score"], "S1003": ""}, scores
    # 5. regrade one: that file alone, the same grade as in the class's run
    again = _rows(work / "regrade.csv")
    assert len(again) == 1 and again[0]["submission"].startswith("submissions/smithjane_1002_"), again
    assert again[0]["score"] == rows["1002"]["score"] and len(list((work / "regrade-feedback").glob("*.md"))) == 1
    # Moodle: a folder per student, copied out by the page's loop and found by its pattern
    moodle = {r["student"]: r for r in _rows(work / "moodle-gradebook.csv")}
    assert set(moodle) == {"1001", "1002", "1003"} and moodle["1003"]["status"] == "missing", moodle
    assert moodle["1001"]["score"] == str(graded) and moodle["1002"]["score"] == rows["1002"]["score"], moodle
    assert sorted(p.name for p in (work / "moodle-submissions").iterdir()) == ["Ada Lovelace_1001.ipynb",
                                                                               "Jane Smith_1002.ipynb"]
