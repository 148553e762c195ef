"""The "For instructors" page's recipe, run as written on a tiny class.

The commands of its first section (every ```bash block, in order) run in a folder of links to this
checkout, where a Canvas download (`submissions.zip`), a Moodle download (`moodle.zip`) and Moodle's
grading worksheet of a class of three were planted with the names the page uses; the page's grading
file (its ```toml block) is `grading.toml` and its class list (its ```text block) `roster.csv`.
Before the regrade, Jane hands in again (her file replaced by an honest one). Then what the page
promises is checked: the student version with its points, a gradebook that finds every student with
the file's points, the Canvas file, the feedback, the regrade in place (every other line byte for
byte), and the Moodle layout and worksheet.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from bertfamily.grading import policy, sandbox
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.moodle import MOODLE_FIELDS
from bertfamily.grading.student import model_answer, student_version

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "instructors.md"
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)
LINKED = ("Makefile", ".venv", "book", "lib", "tools", "tests", "pyproject.toml")


def recipe() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Your first class in 10 minutes")
    return text[start : text.index("\n## ", start + 1)]


def blocks(kind: str) -> list[str]:
    return [body for language, body in FENCE.findall(recipe()) if language == kind]


def _options(command: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", command))


def test_the_recipe_has_its_steps_and_uses_only_options_the_grader_has():
    commands = blocks("bash")
    assert [c.split()[0] for c in commands] == [
        ".venv/bin/python",
        "unzip",
        ".venv/bin/bertfamily-grade",
        ".venv/bin/bertfamily-grade",
        "unzip",
        ".venv/bin/bertfamily-grade",
    ]
    assert "--regrade" in commands[3] and "--moodle-worksheet" in commands[5]
    assert all("--grading grading.toml" in c for c in commands if "bertfamily" in c)
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "bertfamily-grade"), "--help"], capture_output=True, text=True, timeout=120
    )
    known = _options(done.stdout)
    used = set().union(*(_options(c) for c in commands if "bertfamily-grade" in c))
    assert used and used <= known, used - known
    student = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "-m", "bertfamily.grading", "student", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert _options(commands[0]) <= _options(student.stdout), _options(commands[0]) - _options(student.stdout)
    assert len(blocks("text")) == 1 and blocks("text")[0].startswith("id,name,canvas_id,")
    assert len(blocks("toml")) == 1


def test_the_pages_grading_file_is_read_as_it_says(tmp_path):
    (tmp_path / "grading.toml").write_text(blocks("toml")[0], encoding="utf-8")
    rules = policy.load(Exercise.load(EXERCISE), tmp_path / "grading.toml")
    assert (rules.tasks["task1"].points, rules.tasks["task4"].partial, rules.tasks["task10"].bonus) == (2, True, True)
    assert (rules.late, rules.penalty_percent_per_day, rules.counts) == ("penalty", 10, "latest-before-deadline")
    assert rules.due.isoformat() == "2026-03-01T23:59:00+01:00"


ON_TIME = (2026, 3, 1, 20, 0, 0)  # before the page's deadline, as the LMS's zip keeps it


def _entry(name: str) -> zipfile.ZipInfo:
    return zipfile.ZipInfo(name, date_time=ON_TIME)


def _plant(work: Path, reference) -> None:
    honest, blank = model_answer(reference), student_version(reference)
    with zipfile.ZipFile(work / "submissions.zip", "w") as canvas:  # Canvas: name_userid_fileid_name
        canvas.writestr(_entry("lovelaceada_1001_5001_exercise_distilbert.ipynb"), nbformat.writes(honest))
        canvas.writestr(_entry("smithjane_1002_5002_exercise_distilbert.ipynb"), nbformat.writes(blank))
    with zipfile.ZipFile(work / "moodle.zip", "w") as moodle:  # Moodle: a folder per student
        moodle.writestr(
            _entry("Ada Lovelace_1001_assignsubmission_file_/exercise_distilbert.ipynb"), nbformat.writes(honest)
        )
        moodle.writestr(_entry("Jane Smith_1002_assignsubmission_file_/my exercise.ipynb"), nbformat.writes(blank))
    sheet = [MOODLE_FIELDS]
    for number, name, when in (
        ("1001", "Ada Lovelace", "Sunday, 1 March 2026, 8:00 PM"),
        ("1002", "Jane Smith", "Sunday, 1 March 2026, 8:30 PM"),
        ("1003", "Carl Weber", "-"),
    ):
        status = "No submission" if when == "-" else "Submitted for grading"
        sheet.append(
            [f"Participant {number}", name, f"{number}@example.edu", status, "", "13.00", "Yes", when, "-", ""]
        )
    with open(work / "worksheet.csv", "w", newline="", encoding="utf-8-sig") as handle:
        csv.writer(handle).writerows(sheet)
    (work / "roster.csv").write_text(blocks("text")[0], encoding="utf-8")
    (work / "grading.toml").write_text(blocks("toml")[0], encoding="utf-8")


def _task1_solved(reference):
    """The student version with its first solution (task 1's) filled in from the reference: too short
    to be flagged as a copy of a classmate's, so the regrade changes Jane's rows alone."""
    handed, solved = student_version(reference), {c.get("id"): c.source for c in model_answer(reference).cells}
    first = next(c for c in handed.cells if "# YOUR CODE HERE" in c.source)
    first.source = solved[first.get("id")]
    return handed


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _lines(path: Path) -> list[list[str]]:
    """The CSV's records exactly as written (a cell may hold line breaks, so not the file's lines)."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


@pytest.mark.slow  # grades real submissions: left out by make unit
@pytest.mark.sandbox
def test_the_recipe_runs_as_written_on_a_tiny_class(tmp_path):
    if sandbox.sandbox_problem():
        pytest.skip(f"the grader's sandbox is missing: {sandbox.sandbox_problem()}")
    work = tmp_path / "course"
    work.mkdir()
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    exercise = Exercise.load(EXERCISE)
    _plant(work, exercise.reference)
    rules = policy.load(exercise, work / "grading.toml")
    top, bonus = str(policy.number(rules.max_score)), str(policy.number(rules.max_score + 1))
    before = {}
    for command in blocks("bash"):
        command = command.replace("\\\n", " ").strip()
        if "--regrade" in command:  # Jane hands in again, on time, with task 1 solved: her file replaced
            before = {name: _lines(work / name) for name in ("gradebook.csv", "canvas.csv")}
            jane = work / "submissions" / "smithjane_1002_5002_exercise_distilbert.ipynb"
            nbformat.write(_task1_solved(exercise.reference), jane)
            stamp = datetime(*ON_TIME, tzinfo=timezone.utc).timestamp()
            os.utime(jane, (stamp, stamp))
        if "bertfamily-grade" in command:
            command += " --jobs 2"  # two at a time, as on this machine's two cores
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command], cwd=work, capture_output=True, text=True, timeout=1800
        )
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    # 2. hand out: the student version, without solutions, each task's points in its heading
    handed = "\n".join(
        c.source for c in nbformat.read(work / "student" / "exercise_distilbert.ipynb", as_version=4).cells
    )
    assert "# YOUR CODE HERE" in handed and "(2 points)" in handed and "bonus" in handed
    # 4. grade: every student found, the one who handed in nothing missing; 6. Jane regraded in place
    rows = {r["student"]: r for r in _rows(work / "gradebook.csv")}
    assert set(rows) == {"1001", "1002", "1003"}, rows
    assert (rows["1001"]["status"], rows["1001"]["score"], rows["1001"]["max_score"]) == ("graded", bonus, top)
    # Ada's is the model answer, the real exercise's one full run in the suite (nbval runs the solution notebook
    # itself as a lesson): every task's points, its outputs reproduced, nothing said but what is said of it
    ada = rows["1001"]
    assert all(float(ada[t.name]) == rules.tasks[t.name].points for t in exercise.graded), ada
    assert (ada["outputs"], ada["detail"]) == ("reproduced", ""), ada
    # the reference's code: a copy, flagged for the instructor (bertfamily.grading.copies), and nothing else
    assert ada["flags"].startswith("copy: the solution cells of task1, ") and ada["flags"].count("; ") == 0, ada
    assert ada["read_by_hand"].startswith("task7: quantize_dynamic converted only the nn.Linear layers"), ada
    jane = [r for r in before["gradebook.csv"] if r[1] == "1002"][0]
    assert rows["1001"]["late"] == "" and float(rows["1002"]["score"]) >= float(jane[3]) + 2, (jane, rows["1002"])
    assert rows["1003"]["status"] == "missing"
    assert sorted(p.name for p in (work / "feedback").glob("*.md")) == ["1001.md", "1002.md"]
    # 5. upload: Canvas's import file, a row per roster student, Jane's line the only one the regrade changed
    canvas = list(csv.reader(open(work / "canvas.csv", newline="", encoding="utf-8")))
    assert canvas[0][-1] == "DistilBERT exercise (1234)" and canvas[1][0] == "Points Possible"
    graded = {"S1001": bonus, "S1002": rows["1002"]["score"], "S1003": ""}
    assert {line[2]: line[-1] for line in canvas[2:]} == graded, canvas
    for name, old in before.items():
        new = _lines(work / name)
        assert len(new) == len(old) and [a for a, b in zip(old, new, strict=True) if a != b], name
        changed = [a for a, b in zip(old, new, strict=True) if a != b]
        assert all("1002" in a[:3] for a in changed), (name, old, new)  # Jane's row alone
    # Moodle: a folder per student and the worksheet, written back with the grades
    moodle = {r["student"]: r for r in _rows(work / "moodle-gradebook.csv")}
    assert set(moodle) == {"1001", "1002", "1003"} and moodle["1003"]["status"] == "missing", moodle
    assert moodle["1001"]["score"] == bonus and float(moodle["1002"]["score"]) < float(top), moodle
    back = {r["Identifier"]: r for r in csv.DictReader(open(work / "moodle-grades.csv", encoding="utf-8-sig"))}

    # the worksheet's Maximum Grade (13) is not the grading file's maximum: Grade is on Moodle's scale
    def on_moodles_scale(points):
        return str(policy.number(round(float(points) * 13 / float(top), 2)))

    assert back["Participant 1001"]["Grade"] == on_moodles_scale(bonus), back
    assert back["Participant 1003"]["Grade"] == "", back
    assert back["Participant 1002"]["Grade"] == on_moodles_scale(moodle["1002"]["score"]), back
    assert back["Participant 1001"]["Feedback comments"].startswith(f"{bonus} of {top} points"), back
