"""What the instructor should read by hand: a submission's own code that reaches for the grader, the
answer key or the interpreter's machinery, and answers typed in rather than computed.

The sandbox keeps the answer key, classmates and the grader out of the kernel's reach; what a kernel
can still do is patch its own interpreter before a check (its builtins, modules, display hooks) and
mislead the grader's exporter. No honest solution of the exercise needs any of that, so the grader
reads the code the student wrote (never the course's cells) and says where it does, for the
instructor to read. An answer typed as a number (``distilbert_count = 66362880``) gains nothing: the
tasks whose check reads it get no mark, and the row says why.
"""

from __future__ import annotations

import ast
import functools
import importlib.machinery
import os
import sys
from collections import Counter

from bertfamily.grading.denylist import (
    ATTRIBUTES,
    CALCULATORS,
    CHANNEL_ATTRIBUTES,
    CHECKS_ALLOWED,
    DUNDERS,
    EXPORTER_ATTRIBUTES,
    HARMLESS_CALLS,
    MODULES,
    NAMES,
    RUNTIME_MODULES,
    SHADOWED,
    STRINGS,
)
from bertfamily.grading.literals import (
    all_folded,
    chain,
    expected_in_text,
    imported_names,
    in_text_cells,
)
from bertfamily.grading.magics import (
    Unreadable,
    cell_tree,
    magic_call,
    on_ipython,
    plain_shell_line,
    read_cell,
)
from bertfamily.grading.student import SOLUTION, cell_tags


def authored(nb, exercise) -> list[tuple[int, str, str]]:
    """The code the student wrote, as (cell index, source, the course's source of that cell or ""):
    solution cells, added cells and course cells the student changed; never the course's own cells,
    restored checks or their copies."""
    course = {
        c.id: c.source for c in exercise.reference.cells if c.cell_type == "code" and SOLUTION not in cell_tags(c)
    }
    found = []
    for index, cell in enumerate(nb.cells):
        cid = cell.get("id") or ""
        # prepare()'s copy of a changed course cell (id "<course id>-course") holds the course's code only:
        # an id the student chose in that form, with code of their own, is read like any other
        if (
            cell.cell_type != "code"
            or course.get(cid) == cell.source
            or (cid.endswith("-course") and course.get(cid.removesuffix("-course")) == cell.source)
        ):
            continue
        found.append((index, cell.source, course.get(cid, "")))
    return found


def suspicious(nb, exercise, budget=None) -> list[str]:
    """Where the student's own code does what no solution needs (see the module docstring). ``budget``
    (:class:`~bertfamily.grading.budget.Budget`) is asked cell by cell."""
    said, imported, trees = [], {}, []
    for cell in nb.cells:  # the names modules have anywhere in the notebook (checks: the course's cell)
        if budget is not None:
            budget.take(len(cell.source))
        tree = cell_tree_or_none(cell.source) if cell.cell_type == "code" else None
        if tree is not None:
            imported.update(imported_names(tree))
            trees.append(tree)
    imported = aliased(trees, imported, budget)  # the same trees: each cell is parsed once here
    expected = _expected_values()
    for index, source, course in authored(nb, exercise):
        if budget is not None:
            budget.check()
        try:
            tree, unread = read_cell(source)
        except Unreadable as why:
            said.append(f"cell {index} cannot be read by the grader ({why})")
            continue
        if unread:
            said.append(f"cell {index} runs {', '.join(dict.fromkeys(unread))}, whose code the grader does not read")
        if tree is None:
            continue  # not Python: the run reports the error
        try:
            found = _findings(tree, imported, expected)
            if course:  # a course cell the student changed: only what the student's version adds, counted
                # (a second `sys.modules` added beside the course's own is still the student's)
                known = Counter(
                    _findings(cell_tree(course) or ast.Module(body=[], type_ignores=[]), imported, expected)
                )
                kept = []
                for finding in found:
                    if known[finding]:
                        known[finding] -= 1
                    else:
                        kept.append(finding)
                found = kept
        except RecursionError:
            found = ["is nested too deeply to read"]
        found = [f for f in dict.fromkeys(found) if not (f.startswith("uses get_ipython") and _only_magics(tree))]
        if found:
            more = f" and {len(found) - 4} more" if len(found) > 4 else ""
            said.append(f"cell {index} " + ", ".join(found[:4]) + more)
    return said + in_text_cells(nb, exercise, expected, budget)


def cell_tree_or_none(source: str):
    """A code cell's tree, or None where it cannot be read (:func:`suspicious` says so where it matters)."""
    try:
        return cell_tree(source)
    except (Unreadable, RecursionError):
        return None


def _module_of(node, names: dict) -> str | None:
    """The module (or module attribute) ``node`` stands for, through ``names``: ``display``,
    ``IPython.display``, ``sys.modules["IPython.display"]``; None when it is none of these."""
    if isinstance(node, ast.Subscript):
        inner = _module_of(node.value, names)
        if inner == "sys.modules":
            key = node.slice
            return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "sys.modules[...]"
        return None
    parts = chain(node) if isinstance(node, (ast.Name, ast.Attribute)) else []
    if not parts or parts[0] not in names:
        return None
    return ".".join(names[parts[0]].split(".") + parts[1:])


def aliased(trees, imported: dict, budget=None) -> dict:
    """``imported`` and the names the code binds to a module, or to a module's attribute, by plain
    assignment or a loop over a literal list (``m = display``, ``m = sys.modules["IPython.display"]``,
    ``for m in [display]:``): an attribute replaced through ``m`` is the module's."""
    names = dict(imported)
    for _ in range(4):  # chains (a = display; b = a), each pass one link further
        before = len(names)
        for tree in trees:
            if budget is not None:
                budget.check()
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    values = [node.value]
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(
                    node.iter, (ast.List, ast.Tuple, ast.Set)
                ):
                    targets, values = [node.target], list(node.iter.elts)
                else:
                    continue
                for value in values:
                    module = _module_of(value, names)
                    for target in targets if module else ():
                        if isinstance(target, ast.Name) and target.id not in names:
                            names[target.id] = module
        if len(names) == before:
            break
    return names


def _expected_values() -> set:
    """The numbers the checks expect (counts and sizes): a student's code that holds one typed it."""
    from bertfamily import checks

    values = set(checks.expected_counts()) | set(checks.predicted_file_bytes().values())
    split = checks.distilbert_split()
    return values | {checks.kept_in_fp32(), split["linear weights"], split["embedding tables"]}


def _risky(module: str) -> str | None:
    """Why a name bound to ``module`` (imported anywhere in the notebook) is worth reading: None for the
    modules no solution needs to avoid, and for the runtime's own (:data:`RUNTIME_MODULES`)."""
    if module.startswith(RUNTIME_MODULES):
        return None
    return MODULES.get(module.split(".")[0])


def _findings(tree, imported, expected) -> list[str]:
    found = []
    numbers = all_folded(tree)  # every number the code holds, at any depth (one pass)
    own = imported_names(tree)  # what this cell imports itself is said as "imports ..."
    defining = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # @functools.wraps(f) on a def: honest
    decorating = {
        id(n) for f in ast.walk(tree) if isinstance(f, defining) for d in f.decorator_list for n in ast.walk(d)
    }
    bound = {**imported, **own}  # each name's module, this cell's imports first
    harmless = {  # the names in gc.collect(): used so, and only so, gc is not said
        id(n.func.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and not (n.args or n.keywords)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.attr in HARMLESS_CALLS.get(bound.get(n.func.value.id, ""), set())
    }
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                found.append(
                    f"imports {'.' * node.level}{node.module or ''} (a relative import: code the grader does not read)"
                )
            for module in modules:
                if _runtime_module(module, node):
                    continue
                why = MODULES.get(module.split(".")[0])
                if isinstance(node, ast.Import) and module in HARMLESS_CALLS:
                    why = None  # its uses are read instead (harmless)
                elif isinstance(node, ast.ImportFrom) and {a.name for a in node.names} <= HARMLESS_CALLS.get(
                    module, set()
                ):
                    why = None
                if why:
                    found.append(f"imports {module} ({why})")
                elif module and not _installed(module.split(".")[0]):
                    found.append(
                        f"imports {module}, which is not installed (a module the run wrote? its code "
                        "is not read by the grader)"
                    )
                names = [f"{module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else [module]
                if any(n.startswith(CALCULATORS) for n in names + [module]):
                    found.append(f"imports {module} (the course's calculator: was the task counted or measured?)")
        elif isinstance(node, ast.Name) and node.id in NAMES and not (node.id == "wraps" and id(node) in decorating):
            found.append(f"uses {node.id} ({NAMES[node.id]})")
        elif isinstance(node, ast.Name) and bound.get(node.id) in HARMLESS_CALLS and id(node) not in harmless:
            found.append(f"uses {node.id} ({MODULES[bound[node.id]]})")
        elif isinstance(node, ast.Name) and node.id in imported and node.id not in own and _risky(imported[node.id]):
            # a module another cell imported (the course's set-up cell imports subprocess and importlib)
            found.append(f"uses {imported[node.id]} ({_risky(imported[node.id])}), imported in another cell")
        elif isinstance(node, ast.Attribute):
            names = chain(node)
            if names and names[0] in imported:
                names = imported[names[0]].split(".") + names[1:]
            if len(names) >= 2 and (names[-2], names[-1]) in ATTRIBUTES:
                found.append(f"uses {names[-2]}.{names[-1]}")
            elif (
                len(names) >= 2
                and names[-2] == "checks"
                and not names[-1].startswith(CHECKS_ALLOWED)
                and not names[-1].isupper()
            ):
                found.append(f"asks bertfamily.checks for {names[-1]} (the answer key)")
            if isinstance(node.ctx, (ast.Store, ast.Del)) and any(
                isinstance(n, ast.Name) and n.id in imported for n in ast.walk(node.value)
            ):
                # a module's attribute, also through an item or a call ([display][0].x, sys.modules[k].x)
                owner = ".".join(names[:-1]) or _module_of(node.value, imported) or ast.unparse(node.value)[:40]
                found.append(f"replaces {owner}.{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and any(s in node.value for s in STRINGS):
            found.append(f"names {node.value[:40]!r}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and _python_file(node.value):
            found.append(f"names a Python file {node.value[:40]!r} (code the grader does not read)")
        elif numbers.get(id(node)) in expected:
            found.append(f"holds the number {numbers[id(node)]!r}, an answer the checks expect")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (str, bytes))
            and expected_in_text(node.value, expected)
        ):
            found.append(
                f"holds the number {expected_in_text(node.value, expected)[0]!r} in a text, an answer the checks expect"
            )
        if (
            isinstance(node, ast.Attribute)
            and node.attr in CHANNEL_ATTRIBUTES
            and not (isinstance(node.ctx, (ast.Store, ast.Del)) and any(f.endswith(f".{node.attr}") for f in found))
        ):
            found.append(f"uses .{node.attr} ({CHANNEL_ATTRIBUTES[node.attr]}), whatever it is reached through")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, (ast.Store, ast.Del))
            and node.attr in EXPORTER_ATTRIBUTES
            and not any(f.endswith(f".{node.attr}") for f in found)
        ):
            found.append(f"replaces .{node.attr} (what the grader's exporter runs through), whatever holds it")
        if isinstance(node, ast.Attribute) and node.attr in DUNDERS:
            found.append(f"uses .{node.attr} (reaches the interpreter's machinery)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in DUNDERS:
            found.append(f"names {node.value!r} (reaches the interpreter's machinery)")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (node.value in EXPORTER_ATTRIBUTES or node.value in CHANNEL_ATTRIBUTES)
        ):  # setattr(json, "dumps", f)
            found.append(f"names {node.value!r} in a text (what the grader's exporter runs through)")
        elif isinstance(node, ast.keyword) and node.arg in EXPORTER_ATTRIBUTES:  # SimpleNamespace(dumps=f)
            found.append(f"passes {node.arg}= (what the grader's exporter runs through)")
        elif (
            isinstance(node, ast.Attribute) and node.attr in ("update_wrapper", "wraps") and id(node) not in decorating
        ):
            found.append(f"uses .{node.attr} ({NAMES[node.attr]})")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and not isinstance(node.args[1], ast.Constant)
        ):
            found.append(f"uses {node.func.id} with a computed name (an attribute the grader cannot read)")
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr == "__class__":
            found.append("replaces an object's class (.__class__ = ...)")
        elif isinstance(node, ast.keyword) and node.arg == "namespace":  # parse_args(namespace=json) sets its names
            found.append("passes namespace= (what argparse sets attributes on)")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in SHADOWED:
            found.append(f"defines {node.name} (shadows what the grader's exporter uses)")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in SHADOWED:
            found.append(f"assigns {node.id} (shadows what the grader's exporter uses)")
        elif isinstance(node, ast.alias) and node.asname in SHADOWED and node.asname != node.name:
            found.append(f"imports something as {node.asname} (shadows what the grader's exporter uses)")
        if isinstance(node, ast.ClassDef) and (
            node.name.endswith(("Model", "Linear", "Module")) or any("Module" in ".".join(chain(b)) for b in node.bases)
        ):
            found.append(f"defines a model class {node.name} (a stand-in for a real model?)")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "type"
            and len(node.args) == 3
        ):
            found.append("builds a class with type(name, bases, namespace) (a stand-in for a real model?)")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("system", "getoutput")
            and on_ipython(node.func)
            and not plain_shell_line(node)
        ):
            found.append("runs a shell command (!)")
    return found


def _runtime_module(module: str, node) -> bool:
    """An import of what a runtime or editor provides (:data:`RUNTIME_MODULES`): ``from google.colab
    import drive``, ``import google.colab``, ``from google import colab``, ``from IPython.display import
    display``."""
    names = [module] + ([f"{module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else [])
    return any(n == r or n.startswith(r + ".") for n in names[1:] or names for r in RUNTIME_MODULES) or any(
        module == r or module.startswith(r + ".") for r in RUNTIME_MODULES
    )


def _python_file(value) -> bool:
    """A file name of Python code (``helper.py``): a module the run writes, then imports or runs; a ``.pth``
    only in a site folder, where Python runs its lines (elsewhere it is PyTorch's usual name for saved weights)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    name = value.strip().lower() if isinstance(value, str) else ""
    return name.endswith((".py", ".pyc")) or (name.endswith(".pth") and "-packages" in name)


@functools.cache
def _installed(top: str) -> bool:
    """True for a module the grader's Python has (built-in, standard library or installed), found
    without importing it and without looking in the current folder."""
    if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return True
    here = os.path.abspath(os.getcwd())
    paths = [p for p in sys.path if p and os.path.isdir(p) and os.path.abspath(p) != here]
    try:
        return importlib.machinery.PathFinder.find_spec(top, paths) is not None
    except (ImportError, ValueError):
        return False


def _only_magics(tree) -> bool:
    """True when every use of get_ipython is a magic written out (IPython writes ``%timeit x`` as
    ``get_ipython().run_line_magic('timeit', 'x')``) or a shell command: its code is read (:func:`read_cell`),
    or said ("runs a shell command (!)"). One
    walk of the tree (a map of each node's parent), whatever the number of calls."""
    parent = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "get_ipython":
            attribute = parent.get(id(node))
            if not isinstance(attribute, ast.Attribute):
                return False
            call = parent.get(id(attribute))
            # a shell command (``!ls``: get_ipython().system) is said as one by _findings, in those words
            if (
                not isinstance(call, ast.Call)
                or call.func is not attribute
                or (magic_call(call) is None and attribute.attr not in ("system", "getoutput"))
            ):
                return False
    return True
