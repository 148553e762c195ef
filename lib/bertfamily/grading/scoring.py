"""Scoring one run, task by task: marks from the re-run, verified by the grader, reproduction reported.

A task passes when every cell of it ran without error and every check cell printed ``✓`` on the
re-run *and* the grader's own check of the exported answers agrees (:mod:`bertfamily.grading.verify`).
Whether the task's stored outputs reproduced is reported beside the mark; it costs the mark only
under ``--strict-outputs``, where a task handed in without its outputs counts as not reproduced.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import nbformat

from bertfamily.grading.exercise import Exercise
from bertfamily.grading.marks import report
from bertfamily.grading.sandbox import Limits
from bertfamily.grading.student import CHECK
from bertfamily.grading.verify import recheck

REPRODUCED, NOT_STORED = "reproduced", "not checked: handed in without outputs"


@dataclass
class Score:
    """What one run earned, and why."""
    status: str
    marks: dict                                      # graded task -> 1 or 0
    problems: list = field(default_factory=list)     # why marks were lost, "taskN: ..."
    outputs: dict = field(default_factory=dict)      # graded task -> REPRODUCED, NOT_STORED or the difference
    flags: list = field(default_factory=list)        # the grader's check disagrees with the notebook's
    notes: list = field(default_factory=list)        # what was repaired before the run
    feedback: dict = field(default_factory=dict)     # graded task -> the ✗ lines and hints of its checks


def _owners(nb, exercise: Exercise) -> dict:
    """The task name (or None) of each code cell, by index: reference cells by their id; a cell the
    student added belongs to the task of the next reference cell, if that one is in a task."""
    task_of = {cid: t.name for t in exercise.tasks for cid in t.cells}
    known = {c.get("id") for c in exercise.reference.cells}
    owners, added = {}, []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("id") in known:
            owners[index] = task_of.get(cell.get("id"))
            owners.update(dict.fromkeys(added, owners[index]))
            added = []
        else:
            added.append(index)
    owners.update(dict.fromkeys(added))
    return owners


def _difference(index, entry) -> str | None:
    if entry["outcome"] == "failed" and entry["message"] == "Cell outputs differ":
        return f"cell {index}: stored {entry['stored']!r}, re-run {entry['rerun']!r}"
    return None


def _problem(index, entry, cell_timeout) -> str | None:
    """What went wrong in one cell's run, in words; None when it ran (its outputs may differ)."""
    if entry["outcome"] != "failed" or entry["message"] == "Cell outputs differ":
        return None
    message = entry["message"]
    if message.startswith("Timeout"):
        return f"cell {index} ran past the per-cell limit of {cell_timeout:g} s"
    if "Kernel dead" in message:
        return f"cell {index} did not run: the kernel had died"
    errors = [o for o in entry["outputs"] if o["output_type"] == "error"]
    if errors:  # a SyntaxError names the kernel's temporary file of the cell: keep only the line
        evalue = re.sub(r"\([^()]*\.py, line (\d+)\)", r"(line \1)", str(errors[0]["evalue"]))
        return f"cell {index} raised {errors[0]['ename']}: {evalue}"[:200]
    return f"cell {index}: {message}"[:200]


def _check_results(source, outputs):
    """The check results of one check cell's re-run outputs, read with the course's source."""
    rerun = nbformat.from_dict({"cell_type": "code", "source": source, "metadata": {"tags": [CHECK]},
                                "outputs": outputs})
    return report(nbformat.from_dict({"cells": [rerun]}))


def _run_status(run, results, code) -> tuple[str, list]:
    if run["status"]:
        cell = run["cell"]
        where = f" (in cell {code[cell]})" if cell is not None and 0 <= cell < len(code) else ""
        return run["status"], [f"{run['status']}: {run['reason']}{where}"]
    if any(e["phase"] == "setup" for e in results.values()):
        first = next(e for e in results.values() if e["phase"] == "setup")
        return "error", [f"error: the kernel did not start ({first['message']})"[:300]]
    if any(e["message"].startswith("Timeout") for e in results.values()):
        return "timeout", []  # nbval's per-cell limit; the worker stopped there (pytest exit code 2)
    if run["exit_code"] not in (0, 1) or not results:
        last = (run["log"].strip().splitlines() or ["no output"])[-1]
        return "error", [f"error: the grading run failed (pytest exit code {run['exit_code']}): {last}"[:300]]
    if any("Kernel dead" in e["message"] for e in results.values()):
        return "error", ["error: the kernel died"]
    return "graded", []


def score_run(prepared, exercise: Exercise, run: dict, limits: Limits, strict_outputs: bool = False) -> Score:
    """Score the run of ``prepared`` (:func:`~bertfamily.grading.exercise.prepare`'s copy)."""
    nb = prepared.nb
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]  # nbval's cell number -> index
    results = {code[n]: entry for n, entry in run["results"].items() if 0 <= n < len(code)}
    status, problems = _run_status(run, results, code)
    score = Score(status, {}, problems, notes=[f"{t}: {what}" if t else what for t, what in prepared.notes])
    owners = _owners(nb, exercise)
    by_id = {c.get("id"): (i, c) for i, c in enumerate(nb.cells)}
    for task in exercise.graded:
        found, reached, differs, stored, feedback = [], True, [], True, []
        for index in (i for i in code if owners.get(i) == task.name):
            if index not in results:  # the run stopped before it (the status says why)
                reached = False
                continue
            found.extend(p for p in [_problem(index, results[index], limits.cell_timeout)] if p)
            differs.extend(d for d in [_difference(index, results[index])] if d)
        for cid, source in task.checks:
            index, cell = by_id[cid]
            stored = stored and bool(cell.get("outputs"))
            if index not in results:
                continue
            for r in _check_results(source, results[index]["outputs"]):
                if r.passed or r.message.startswith("error"):
                    continue
                found.append("its check printed no result" if r.task.startswith("cell ") else
                             f"✗ {r.task}: {r.message}"[:200])
                feedback.append(f"✗ {r.task}: {r.message}" + (f" (hint: {r.hint})" if r.hint else ""))
        if not reached and status == "graded":
            found.append("not all of its cells ran")
        if reached and not found:  # the notebook says ✓: the grader checks the answers itself
            for cid, source in task.checks:
                answers = run.get("answers", {}).get(cid)
                if answers is None:  # the exporter never fails on an honest notebook
                    found.append("not verified: its check cell saved no answers for the grader")
                    score.flags.append(f"{task.name}: the notebook's check printed ✓ but its answers never reached "
                                       "the grader (the grader's exporter was stopped in the kernel)")
                    continue
                ok, why = recheck(source, answers)
                if not ok:
                    found.append(f"the grader's own check of the answers: {why}")
                    score.flags.append(f"{task.name}: the notebook's check printed ✓ but the answer is wrong (the "
                                       f"grader's check: {why}): check code was altered in the kernel")
                    feedback.append(f"the grader's own check of your answer: {why}")
        score.outputs[task.name] = ("differs: " + differs[0]) if differs else REPRODUCED if stored else NOT_STORED
        if strict_outputs and reached and score.outputs[task.name] != REPRODUCED:
            found.append(f"its stored outputs do not reproduce ({differs[0]}) and --strict-outputs requires it"
                         if differs else "it was handed in without its outputs, which --strict-outputs requires")
        score.marks[task.name] = 1 if reached and not found else 0
        score.problems.extend(f"{task.name}: {p}" for p in found)
        score.feedback[task.name] = feedback
    for index in code:
        if owners.get(index) is None and index in results:
            problem = _problem(index, results[index], limits.cell_timeout)
            if problem:
                score.problems.append(f"not in a task: {problem}")
    return score
