"""Scoring one run, task by task: marks from the re-run, checked by the grader, reproduction reported.

A task passes when its cells were reached on the re-run and the grader's own check of each answer its
check cells sent says ``✓`` (:mod:`bertfamily.grading.verify`, one verdict per check, kept in
``Score.checks``): the kernel has no answer key, so the verdict is the grader's alone. A task is scored
on its own checks: an error in a line that no check reads (one that prints an earlier task's answer)
is said, not scored, and a check that reads an answer never defined names the task it comes from
(:mod:`bertfamily.grading.causes`). An answer typed as a number gains nothing, and code that
reaches for the grader or the interpreter's machinery is flagged (:mod:`bertfamily.grading.integrity`).
Whether the task's stored outputs reproduced (its check cells' against the grader's check) is reported
beside the mark; it costs the mark only under ``--strict-outputs``, where a task handed in without its
outputs counts as not reproduced.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import TypedDict

import nbformat

from bertfamily.grading import causes, integrity
from bertfamily.grading.budget import Budget, OverBudget
from bertfamily.grading.causes import answer_tasks, needs, typed_answers, typed_origins, undefined_name
from bertfamily.grading.channel import answers_of, read_names, sent_answers
from bertfamily.grading.exercise import Exercise, solution_trees
from bertfamily.grading.hub import served_in, served_note
from bertfamily.grading.marks import MARK_LINE, output_text, report
from bertfamily.grading.monitor import Limits
from bertfamily.grading.student import CHECK

REPRODUCED, NOT_STORED = "reproduced", "not checked: handed in without outputs"


class Verdicts(TypedDict):
    """One graded task's checks, by their verdicts on the grader's re-check (:attr:`Score.checks`)."""
    passed: list[str]
    failed: list[str]
    partial: bool  # partial credit allowed: no answer of the task was typed or forged


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
    read_by_hand: list = field(default_factory=list)  # "taskN: text" answers the instructor reads
    checks: dict[str, Verdicts] = field(default_factory=dict)  # graded task -> its checks' verdicts


def _owners(nb, exercise: Exercise) -> dict[int, str | None]:
    """The task name (or None) of each code cell, by index: reference cells by their id; a cell the
    student added belongs to the task of the next reference cell, if that one is in a task."""
    task_of = {cid: t.name for t in exercise.tasks for cid in t.cells}
    known = {c.get("id") for c in exercise.reference.cells}
    owners: dict[int, str | None] = {}
    added: list[int] = []
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
        stored, rerun = (_ANSI.sub("", str(entry[k])) for k in ("stored", "rerun"))  # pip's colours: not text
        return f"cell {index}: stored {stored!r}, re-run {rerun!r}"
    return None


#: An error is said whole, up to this many characters (a runaway message stays readable in a CSV).
ERROR_CHARS = 2000
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _where(source: str, error: dict | None, evalue: str = "") -> str:
    """The cell as the student sees it: its first line and, from the traceback (or a SyntaxError's
    ``(line N)``), the line that raised."""
    lines = source.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    trace = _ANSI.sub("", "\n".join(error.get("traceback") or [])) if error else ""
    found = (re.search(r"Cell In\[\d+\], line (\d+)", trace) or re.search(r"^-+> (\d+) ", trace, re.M)
             or re.search(r"\(line (\d+)\)", evalue))
    parts = [f"the cell that starts {_code(_cut(first, 60))}"] if first else []
    if found and 0 < int(found.group(1)) <= len(lines):
        number = int(found.group(1))
        parts.append(f"line {number}: {_code(_cut(lines[number - 1].strip(), 100))}")
    return f" ({', '.join(parts)})" if parts else ""


def _cut(text: str, most: int) -> str:
    """``text`` cut to about ``most`` characters at a space, with "…" where it was cut (never mid-word)."""
    if len(text) <= most:
        return text
    space = text.rfind(" ", most // 2, most + 1)  # a word cut in two reads as another word
    return (text[:space] if space > 0 else text[:most]).rstrip() + " …"


def _code(text: str) -> str:
    """A line of the student's code quoted as Markdown code, whole: a backtick in it does not end the
    quote (a longer fence), and its "; " is not where the gradebook's detail parts are split."""
    text = text.replace("; ", ";\u00a0")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if fence != "`" else f"`{text}`"


def _cell_problem(index, entry, cell_timeout, nb, definitions) -> str | None:
    """:func:`_problem` of the notebook's cell ``index``, and a name a later cell defines said so
    (:func:`~bertfamily.grading.causes.defined_below`; ``definitions()``: the notebook's, read once)."""
    problem = _problem(index, entry, cell_timeout, nb.cells[index].source)
    below = causes.defined_below(definitions(), index, problem) if undefined_name(problem or "") else None
    return f"{problem} ({below})" if below else problem


def _problem(index, entry, cell_timeout, source: str = "") -> str | None:
    """What went wrong in one cell's run, in words, with the cell as the student sees it (its first
    line, the line that raised) and the error whole; None when it ran (its outputs may differ)."""
    if entry["outcome"] != "failed" or entry["message"] == "Cell outputs differ":
        return None
    message = entry["message"]
    if message.startswith("Timeout"):
        return f"cell {index}{_where(source, None)} ran past the per-cell limit of {cell_timeout:g} s"
    if "Kernel dead" in message:
        return f"cell {index}{_where(source, None)} did not run: the kernel had died"
    errors = [o for o in entry["outputs"] if o["output_type"] == "error"]
    if errors:  # a SyntaxError names the kernel's temporary file of the cell: keep only the line
        evalue = re.sub(r"\([^()]*\.py, line (\d+)\)", r"(line \1)", str(errors[0]["evalue"]))
        evalue = evalue.replace("; ", ";\u00a0")  # the student's words: not where the detail's parts split
        return f"cell {index}{_where(source, errors[0], evalue)} raised {errors[0]['ename']}: {evalue}"[:ERROR_CHARS]
    return f"cell {index}: {message}"[:ERROR_CHARS]


def _check_results(source, outputs):
    """The check results of one check cell's re-run outputs, read with the course's source."""
    rerun = nbformat.from_dict({"cell_type": "code", "source": source, "metadata": {"tags": [CHECK]},
                                "outputs": outputs})
    return report(nbformat.from_dict({"cells": [rerun]}))


def _run_status(run, results, code, cells) -> tuple[str, list]:
    if run["status"]:
        cell = run["cell"]
        where = f" (in cell {code[cell]})" if cell is not None and 0 <= cell < len(code) else ""
        return run["status"], [f"{run['status']}: {run['reason']}{where}{causes.stopped_itself(cells, code, cell)}"]
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


_ANSWER_KEY = "is the answer key: it stays with the grader"


def _for_the_instructor(source: str) -> list[str]:
    """The names a check cell hands to ``checks.for_the_instructor`` (read by hand, never scored)."""
    import ast
    return [node.args[0].id for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "for_the_instructor" and node.args and isinstance(node.args[0], ast.Name)]


def _marks(text: str) -> list[str]:
    """A check's verdicts, ``✓ Task 3 (the reduction)``: what must reproduce (its message may name
    what only the student's real model shows, which the grader's stand-in does not)."""
    return [f"{m.group(1)} {m.group(2)}" for m in map(MARK_LINE.match, text.splitlines()) if m]


def measured_names(exercise: Exercise) -> set[str]:
    """The answers the reference solution measures as a file's size (``x = os.path.getsize(path)``, or
    ``.st_size``): a submission's value of one must be the size of a file its run wrote."""
    import ast

    names: set[str] = set()
    for _, tree in solution_trees(exercise.reference.cells):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                    (isinstance(n, ast.Attribute) and n.attr in ("getsize", "st_size")) for n in ast.walk(node.value)):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _sizes_before(results: dict, index: int, key: str = "sizes") -> set:
    """The sizes of the files the run held at the end of any cell before ``index`` (``key="unsaved"``: those of
    a MiB or more that no saved model had)."""
    return {size for i, entry in results.items() if i < index for size in entry.get(key) or ()}


def _not_a_file(name: str, value, sizes: set) -> str | None:
    """Why the answer ``name`` is not a size the run measured (None: a file of that size was there)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value in sizes:
        return None  # not a number: the check says what is wrong
    return (f"`{name}` ({value:,}) is not the size of any file the run wrote: it earns no mark (measure the one file "
            "torch.save wrote, with os.path.getsize, not a folder's files added up)")


def _raised_now(index, cell, problem) -> str | None:
    """A stored cell that ran cleanly where the student worked but raised on the re-run: its outputs did not
    reproduce (nbval reports the error, not a difference)."""
    stored = cell.get("outputs") or []
    if problem and stored and not any(o.get("output_type") == "error" for o in stored):
        return f"cell {index}: stored without an error, the re-run {problem.split(' ', 2)[-1]}"[:200]
    return None


def _verdict(source, result, task, answer_task, errors) -> list[tuple[str, str]]:
    """What one failed check says: (the gradebook's words, the feedback's), for each of its ✗ lines, or
    for the answer it did not have (named with the task it comes from), or for why the grader's check
    could not pass it."""
    stream = [{"output_type": "stream", "name": "stdout", "text": result["printed"]}]
    lines = [r for r in _check_results(source, stream) if not r.task.startswith("cell ") and not r.passed]
    if lines:
        return [(f"✗ {r.task}: {r.message}"[:200],
                 f"✗ {r.task}: {r.message}" + (f" (hint: {r.hint})" if r.hint else "")) for r in lines]
    if result["missing"]:
        why = "; ".join(needs(task, name, answer_task, errors) for name in result["missing"])
        return [(f"{result['check']}: {why}"[:300], f"{result['check']} had no answer: {why}")]
    return [(f"the grader's check: {result['why']}", f"the grader's check of your answer: {result['why']}")]


def _said_not_scored(task, problem, answer_task, errors) -> str:
    name = undefined_name(problem)
    cause = f": {needs(task, name, answer_task, errors)}" if name else ""
    return f"note: {problem}{cause} (its checks passed: no mark lost)"


def score_run(prepared, exercise: Exercise, run: dict, limits: Limits, strict_outputs: bool = False) -> Score:
    """Score the run of ``prepared`` (:func:`~bertfamily.grading.submission.prepare`'s copy)."""
    # the checks import torch: imported here, where a row is scored (a pool's workers), not by every
    # process that imports the grader (the command that hands the class to them, ~2.5 s of CPU each)
    from bertfamily.grading.verify import recheck_each

    nb = prepared.nb
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]  # nbval's cell number -> index
    results = {code[n]: entry for n, entry in run["results"].items() if 0 <= n < len(code)}
    status, problems = _run_status(run, results, code, nb.cells)
    score = Score(status, {}, problems, notes=[f"{t}: {what}" if t else what for t, what in prepared.notes])
    owners = _owners(nb, exercise)
    by_id = {c.get("id"): (i, c) for i, c in enumerate(nb.cells)}
    checked = {cid for task in exercise.tasks for cid, _ in task.checks}
    reads = {task.name: {n for _, source in task.checks for n in read_names(source)} - {
        n for _, source in task.checks for n in _for_the_instructor(source)} for task in exercise.graded}
    budget = Budget()  # the grader's reading of the code: bounded in time and size, whatever the notebook
    definitions = functools.cache(lambda: causes.top_level_definitions(nb))  # read where a NameError asks, once
    problem_of = functools.cache(lambda i: _cell_problem(i, results[i], limits.cell_timeout, nb, definitions))
    typed, origins = {}, {}
    try:  # the typed answers found stand where the rest of the reading then runs over
        typed = typed_answers(nb, exercise, set().union(*reads.values()), budget)
        origins = typed_origins(nb, exercise, typed)
        said = integrity.suspicious(nb, exercise, budget)
    except OverBudget as exc:  # not read: the instructor reads it; the marks come from the run (and typed)
        said = [f"not read by the grader: {exc}"]
    measured = measured_names(exercise)
    for index, entry in sorted(results.items()):
        if nb.cells[index].get("id") not in checked and sent_answers(entry["outputs"]):
            said.append(f"cell {index} sent a message in the grader's answers format: forged")
        errors = [o for o in entry["outputs"] if o["output_type"] == "error" and _ANSWER_KEY in str(o.get("evalue"))]
        if errors:
            said.append(f"cell {index} asked for the answer key ({str(errors[0]['evalue']).split(' is the')[0]})")
    if said:
        score.flags.append("read by hand: " + "; ".join(dict.fromkeys(said)))
    answer_task = answer_tasks(exercise)
    # task -> its cells' problems on the re-run, in order: the causes of missing answers
    task_errors: dict[str, list[str]] = {}
    for index in (i for i in code if i in results):
        problem = problem_of(index)
        owner = owners.get(index)
        if problem and owner:
            task_errors.setdefault(owner, []).append(problem)
    for task in exercise.graded:
        found: list[str] = []
        differs: list[str] = []
        feedback: list[str] = []
        raised: list[str] = []
        served: list[str] = []
        reached, stored = True, True
        check_cells = {by_id[cid][0] for cid, _ in task.checks if cid in by_id}
        verdicts = Verdicts(passed=[], failed=[], partial=True)  # partial credit: none for a typed answer
        for index in (i for i in code if owners.get(i) == task.name):
            if index not in results:  # the run stopped before it (the status says why)
                reached = False
                continue
            problem = problem_of(index)
            if problem and index not in check_cells:  # a check cell's error is its checks' verdict
                raised.append(problem)
            differs.extend(d for d in [_difference(index, results[index]) or _raised_now(index, nb.cells[index],
                                                                                             problem)] if d)
            served += served_in("".join(o.get("text", "") for o in results[index]["outputs"]
                                        if o.get("output_type") == "stream"))
        if served:
            score.notes.append(f"{task.name}: note: {served_note(dict.fromkeys(served))}")
        for name in sorted(reads[task.name] & set(typed)):
            sources = ", ".join(f"`{n}`" for n in origins[name])
            if sources:  # what the student did: computed, from numbers typed elsewhere
                found.append(f"`{name}` is computed from {sources}, typed as a number rather than measured "
                             f"(cell {typed[name]}): it earns no mark")
                score.flags.append(f"{task.name}: `{name}` computed from {sources}, typed as a number")
                verdicts["partial"] = False
            else:
                found.append(f"`{name}` is typed as a number (cell {typed[name]}), not computed: it earns no mark")
                score.flags.append(f"{task.name}: `{name}` typed as a number in cell {typed[name]}")
                verdicts["partial"] = False
        for cid, source in task.checks:
            if cid not in by_id:  # prepare() puts every check back: never an honest notebook
                found.append("its check cell is missing")
                continue
            index, cell = by_id[cid]
            stored = stored and bool(cell.get("outputs"))
            if index not in results:
                if status == "graded":  # a run that stopped says why in its status
                    found.append("its check cell did not run")
                continue
            answers, trouble = answers_of(cid, results[index]["outputs"], read_names(source))
            if trouble:
                score.flags.append(f"{task.name}: {trouble}")
                verdicts["partial"] = False
            problem = None if answers is not None else problem_of(index)
            if problem:
                found.append(problem)
                continue
            if answers is None:
                found.append("its check cell sent no answers to the grader")
                if not trouble:
                    score.flags.append(f"{task.name}: its check cell ran but its answers never reached the grader "
                                       "(the grader's exporter was stopped in the kernel)")
                continue
            sizes = _sizes_before(results, index) if measured else set()
            unsaved = _sizes_before(results, index, "unsaved") if measured else set()
            for name in sorted(set(read_names(source)) & measured):
                value = answers.get(name)
                why = _not_a_file(name, value.get("plain") if isinstance(value, dict) else None, sizes)
                if why:
                    found.append(why)
                    feedback.append(why)
                    score.flags.append(f"{task.name}: `{name}` is not the size of a file the run wrote")
                    verdicts["partial"] = False
                elif isinstance(value, dict) and value.get("plain") in unsaved:
                    score.flags.append(f"{task.name}: `{name}` ({value['plain']:,}) is the size of a file that is no "
                                       "model torch.save or safetensors wrote (pickle.dump? raw bytes?): read by hand")
            for name in _for_the_instructor(source):
                text = (answers.get(name) or {}).get("plain")
                if isinstance(text, str) and text.strip():
                    score.read_by_hand.append(f"{task.name}: {' '.join(text.split())}")
            each = recheck_each(source, answers)
            if not each:
                found.append("the grader's check: its check cell holds no check")
            printed = "".join(r["printed"] for r in each)
            for r in each:
                (verdicts["passed"] if r["passed"] else verdicts["failed"]).append(r["check"])
                if not r["passed"]:
                    lines = _verdict(source, r, task.name, answer_task, task_errors)
                    found += [line for line, _ in lines]
                    feedback += [line for _, line in lines]
            if cell.get("outputs"):
                before = _marks(output_text(cell))
                if before != _marks(printed):
                    first = next((b, a) for b, a in zip_longest(before, _marks(printed), fillvalue="(nothing)")
                                 if b != a)
                    differs.append(f"cell {index}: stored {first[0][:100]!r}, re-run {first[1][:100]!r}")
        score.outputs[task.name] = ("differs: " + differs[0]) if differs else REPRODUCED if stored else NOT_STORED
        if strict_outputs and reached and score.outputs[task.name] != REPRODUCED:
            found.append(f"its stored outputs do not reproduce ({differs[0]}) and --strict-outputs requires it"
                         if differs else "it was handed in without its outputs, which --strict-outputs requires")
        if not reached and status == "graded":
            found.append("not all of its cells ran")
        score.marks[task.name] = 1 if reached and not found else 0
        if found or not reached:  # what its own cells raised, as the cause (of a run that stopped in it, too)
            found[:0] = raised
        else:  # an error in a line no check reads (one that prints an earlier task's answer) costs nothing
            score.notes += [f"{task.name}: {_said_not_scored(task.name, p, answer_task, task_errors)}" for p in raised]
        score.problems.extend(f"{task.name}: {p}" for p in found)
        score.feedback[task.name] = feedback
        score.checks[task.name] = verdicts
    for index in code:
        if owners.get(index) is None and index in results:
            problem = problem_of(index)
            if problem:
                score.problems.append(f"not in a task: {problem}")
    return score

