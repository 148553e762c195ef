"""Why a check failed, in the words of the notebook: which task an answer belongs to, and what stopped it.

A task is scored on its own checks. When a check reads an answer that was never defined, the feedback
names the task that defines it and what went wrong there ("task6 needs `int8_mib` from task4 ..."),
and an error in a line that only prints an earlier task's answer is said, not scored. An answer typed
rather than computed (:func:`typed_answers`) earns nothing, and the feedback says what it was computed from.
"""

from __future__ import annotations

import ast
import re

from bertfamily.grading.exercise import Exercise, solution_trees
from bertfamily.grading.integrity import authored
from bertfamily.grading.literals import bindings, is_placeholder, literal_names
from bertfamily.grading.magics import Unreadable, cell_tree
from bertfamily.grading.marks import execute_copy, report
from bertfamily.grading.student import SOLUTION, cell_tags, targets_of

_UNDEFINED = re.compile(r"name '(\w+)' is not defined")


def answer_tasks(exercise: Exercise) -> dict:
    """{name: the task whose solution (in the reference) first defines it}, for every name a task's
    solution binds at its top level (its answers, its helpers: ``load``, ``int8_path``)."""
    owner: dict[str, str] = {}
    cells = {c.get("id"): c for c in exercise.reference.cells}
    for task in exercise.tasks:
        for _, tree in solution_trees(cells.get(cid) for cid in task.cells):
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    owner.setdefault(node.id, task.name)
                elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    owner.setdefault(node.name, task.name)
    return owner


def undefined_name(problem: str) -> str | None:
    """The name of a ``NameError`` a cell's problem reports (``... raised NameError: name 'x' is not
    defined``), or None."""
    found = _UNDEFINED.search(problem or "")
    return found.group(1) if found and "NameError" in problem else None


def top_level_definitions(nb) -> dict[str, list[int]]:
    """{name: the code cells (their indices, in order) that bind it at their top level}, each cell read once."""
    found: dict[str, list[int]] = {}
    for index, cell in enumerate(nb.cells):
        try:
            tree = cell_tree(cell.source) if cell.cell_type == "code" else None
        except Unreadable:
            continue
        for name in _top_level_names(tree) if tree is not None else ():
            found.setdefault(name, []).append(index)
    return found


def defined_below(definitions: dict, index: int, problem: str | None) -> str | None:
    """Where a cell's ``NameError`` names what a later cell defines (a notebook run out of order: the ✓ the
    student saw came from that cell run first), in :func:`top_level_definitions`: the words that say so, or None."""
    name = undefined_name(problem or "")
    cells = definitions.get(name, ()) if name else ()
    later = next((i for i in cells if i > index), None)
    if later is None or any(i < index for i in cells):  # a cell above defines it: that cell failed, not the order
        return None
    return (
        f"`{name}` is defined further down, in cell {later}: run from the top (Kernel → Restart & Run All), "
        "as the grader runs it, the notebook uses it before that cell has run"
    )


def _top_level_names(tree) -> set[str]:
    """The names a cell binds at its top level (not inside a function or class): assigned, defined, imported."""
    names, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.add(child.id)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(child.name)  # a def under an if or a with: its body binds nothing here
            elif not isinstance(child, ast.Lambda):
                todo.append(child)
    return names


def needs(task: str, name: str, owners: dict, errors: dict) -> str:
    """Why ``task`` had no ``name``: the task that defines it, and what stopped it there in a few words
    (``errors``: {task: its cells' problems}, said in full in that task's own line)."""
    source = owners.get(name)
    if source is None or source == task:
        return f"`{name}` was not defined (see the error above)" if errors.get(task) else f"`{name}` was not defined"
    # "cell 12 (the cell that starts `# Task 2: ...`, line 3: `...`) raised NameError: ...": "cell 12 raised NameError"
    first = (errors.get(source) or [""])[0]
    stopped = first.split(" (the cell that starts", 1)[0].split(": ", 1)[0]
    raised = re.search(r"\) raised ([\w.]+)", first) if " raised " not in stopped else None
    stopped += f" raised {raised[1]}" if raised else ""
    return f"{task} needs `{name}` from {source}" + (f", where {stopped}" if stopped else ", which did not define it")


def typed_origins(nb, exercise, names) -> dict:
    """For each of ``names`` (answers :func:`typed_answers` found), the typed names it is computed from
    (``reduction = 1 - distilbert_count / bert_count`` with both counts typed: ``["bert_count",
    "distilbert_count"]``); [] for a name typed itself (a number, or arithmetic on numbers only)."""
    trees = []
    for _, source, _ in authored(nb, exercise):
        try:
            tree = cell_tree(source)
        except Unreadable:
            continue
        if tree is not None:
            trees.append(tree)
    values, _ = bindings(trees)
    origins = {}
    for name in names:
        used = {
            n.id
            for value in values.get(name, ())
            for n in ast.walk(value)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id != name and n.id in values
        }
        origins[name] = sorted(used)
    return origins


def typed_answers(nb, exercise, answers: set[str], budget=None) -> dict:
    """The answers the student typed rather than computed: {name: cell index} for each name in
    ``answers`` (the names the checks read) that the student's code binds, every binding being made of
    literals (:func:`literal_names`), whatever wraps them."""
    trees = []
    for index, source, _ in authored(nb, exercise):
        if budget is not None:
            budget.take(len(source))
        try:
            tree = cell_tree(source)
        except Unreadable:
            continue  # said by suspicious()
        if tree is not None:
            trees.append((index, tree))
    course = [
        cell_tree(c.source) for c in exercise.reference.cells if c.cell_type == "code" and SOLUTION not in cell_tags(c)
    ]
    given = set(bindings([t for t in course if t is not None])[0])  # the data the course's cells give
    known = literal_names([t for _, t in trees], given, budget)
    typed: dict[str, int] = {}
    for index, tree in trees:
        for node in ast.walk(tree):
            targets = targets_of(node)
            if is_placeholder(getattr(node, "value", None)):
                continue  # the placeholder (x = None), not where the number was typed
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id in answers and name.id in known:
                        typed.setdefault(name.id, index)
    return typed


def run_order_notes(nb) -> list[str]:
    """What the self-check adds to its ✗ lines for a notebook that worked only out of order: each ``NameError`` of
    the executed copy ``nb`` whose name a later cell defines (:func:`defined_below`), once a name, in the words of
    the grader's feedback."""
    definitions, said, notes = top_level_definitions(nb), set(), []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else ():
            problem = f"NameError: {out.get('evalue')}" if out.get("ename") == "NameError" else ""
            note, name = defined_below(definitions, index, problem), undefined_name(problem)
            if note and name not in said:
                said.add(name)
                notes.append(f"cell {index}: {note}")
    return notes


def self_check_with_causes(path, timeout: int = 600) -> tuple[list, list[str]]:
    """The self-check of the notebook at ``path`` (:func:`~bertfamily.grading.marks.self_check`: a copy run where
    and as whoever calls it, not a grade), and :func:`run_order_notes` of that run."""
    ran = execute_copy(path, timeout=timeout)
    return report(ran), run_order_notes(ran)


#: How a notebook stops its own kernel: Colab's "restart the runtime" idiom (``os.kill(os.getpid(), 9)``), an exit.
_SELF_STOP = re.compile(
    r"\bos\.kill\(\s*os\.getpid\(\)|\bos\._exit\(|^\s*(?:exit|quit|sys\.exit)\(|do_shutdown\(", re.M
)


def stopped_itself(cells, code: list, cell) -> str:
    """Why the kernel died in nbval's code cell number ``cell`` (``code`` maps it to its index in ``cells``), where
    that cell stops its kernel itself (lecturer round 11: a Colab notebook kept its restart-the-runtime cell, and the
    student's feedback said only "the kernel died"); else ""."""
    if cell is None or not 0 <= cell < len(code) or not _SELF_STOP.search(cells[code[cell]].get("source") or ""):
        return ""
    return (
        ": the cell stops its own kernel (as Colab's restart-the-runtime line `os.kill(os.getpid(), 9)` does), "
        "so no cell below it ran; delete it (restart from the Runtime or Kernel menu instead) and check the "
        "notebook with Restart & Run All"
    )
