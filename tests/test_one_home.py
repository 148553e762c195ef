"""One home per name (issue 49): each function, class and constant of ``lib/bertfamily`` is defined in
one module and imported from there. Read from the source with :mod:`ast` (nothing is imported).

For every module (``__init__.py`` files, a package's public face, and ``env.py``, the shim students'
saved notebooks import, aside) the test fails when

(a) it imports a name from another ``bertfamily`` module and never uses it (a re-export),
(b) it imports a ``_private`` name from another module (``from .x import _y``, or ``x._y`` of a module
    ``x`` it imports),
(c) a public top-level function or class name is defined in two modules (the allowlist below names
    the few left, each with its reason; each entry must still be needed, so it can only shrink),
(d) its ``__all__`` names a name it imports from another ``bertfamily`` module (a re-export face of a
    name it also uses).

Beside the names, the same issue's size: no module of ``lib/``, ``tools/`` or ``benchmarks/`` is over
:data:`MAX_LINES` lines (a module that outgrows its idea is split along its ideas).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import MAX_LINES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lib" / "bertfamily"
#: Not checked: students' saved notebooks import ``bertfamily.env`` (``from bertfamily.env import ...``).
SHIMS = {"bertfamily.env"}

#: (c) Public function and class names defined in more than one module: name -> (those modules, why).
DUPLICATES = {
    "main": (
        {"bertfamily.grading.cli", "bertfamily.grading.nbval_worker", "bertfamily.webmodel"},
        "each runnable module's entry point (console script, worker command, python -m)",
    ),
    "accuracy": (
        {"bertfamily.distillation", "bertfamily.transfer"},
        "two accuracies (of logits; of a probe), each read by its lesson as module.accuracy",
    ),
    "blank_predictions": (
        {"bertfamily.checkpoints.scores", "bertfamily.tlm"},
        "two functions (top five per held-out blank; top guess per TLM blank), both read by lessons",
    ),
    "count": (
        {"bertfamily.budget", "bertfamily.sharing"},
        "sharing.count extends budget.count to ALBERT's groups; lesson 4 reads sharing.count",
    ),
    "multilingual_e5": (
        {"bertfamily.e5.cache", "bertfamily.models"},
        "models' checks the package is installed, then calls e5's; the lessons read models'",
    ),
    "size_calculator": (
        {"bertfamily.quantization", "bertfamily.widgets"},
        "lesson 3's numbers and the widget that shows them, both read by the lesson",
    ),
    "triple_loss": (
        {"bertfamily.diagrams", "bertfamily.losses"},
        "DistilBERT's loss and its diagram, read by the lesson as diagrams.triple_loss",
    ),
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source_module(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name of the module a ``from ... import`` reads (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _used_names(tree: ast.Module) -> set[str]:
    """Every name a module reads (string annotations included)."""
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        annotations = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            annotations = [
                a.annotation
                for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
                if a is not None
            ]
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        for annotation in annotations:
            for part in ast.walk(annotation) if annotation is not None else ():
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    try:
                        used.update(
                            n.id for n in ast.walk(ast.parse(part.value, mode="eval")) if isinstance(n, ast.Name)
                        )
                    except SyntaxError:
                        pass
    return used


def _is_module(name: str, root: Path) -> bool:
    path = root.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _top_level_definitions(tree: ast.Module) -> set[str]:
    """Public function and class names defined at a module's top level (in its ``if``/``try`` blocks too)."""
    found, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not node.name.startswith("_"):
                found.add(node.name)
        elif isinstance(node, ast.If):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
    return found


def problems(root: Path = PACKAGE) -> dict[str, set]:
    """What breaks the rule under ``root`` (a package folder): ``reexports`` and ``private`` as
    ``(module, name)`` pairs, ``duplicates`` as ``name -> modules``."""
    top = root.name
    reexports, private, exported, defined = set(), set(), set(), {}
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        is_package = path.name == "__init__.py"
        if is_package or module in SHIMS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in _top_level_definitions(tree):
            defined.setdefault(name, set()).add(module)
        used = _used_names(tree)
        modules = set()  # local names bound to modules of the package
        imported = set()  # local names bound by imports from the package
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _source_module(node, module, is_package)
                if source != top and not source.startswith(top + "."):
                    continue
                for alias in node.names:
                    local = alias.asname or alias.name
                    imported.add(local)
                    if _is_module(f"{source}.{alias.name}", root):
                        modules.add(local)
                    if local not in used:
                        reexports.add((module, local))
                    if alias.name.startswith("_") and source != module:
                        private.add((module, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and (alias.name + ".").startswith(top + "."):
                        modules.add(alias.asname)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                private.add((module, f"{node.value.id}.{node.attr}"))
        exported |= {(module, name) for name in (_all_names(tree) & imported) - _bound_at_top(tree)}
    duplicates = {name: modules for name, modules in defined.items() if len(modules) > 1}
    return {"reexports": reexports, "private": private, "exported": exported, "duplicates": duplicates}


def _all_names(tree: ast.Module) -> set[str]:
    """The strings of a module's top-level ``__all__ = [...]`` (empty when it has none)."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, (ast.List, ast.Tuple))
        ):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _bound_at_top(tree: ast.Module) -> set[str]:
    """Names a module itself defines at its top level: functions, classes and assigned names."""
    bound = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return bound


@pytest.fixture(scope="module")
def found():
    return problems()


def test_no_module_reexports_a_name_it_does_not_use(found):
    assert sorted(found["reexports"]) == []


def test_no_private_name_is_imported_from_another_module(found):
    assert sorted(found["private"]) == []


def test_no_module_exports_a_name_it_does_not_define(found):
    assert sorted(found["exported"]) == []


def test_each_public_function_and_class_is_defined_once(found):
    allowed = {name: modules for name, (modules, _) in DUPLICATES.items()}
    assert {n: sorted(m) for n, m in found["duplicates"].items() if allowed.get(n) != m} == {}


def test_the_allowlist_is_still_needed(found):
    """An entry that is no longer needed goes: the list only shrinks."""
    assert sorted(set(DUPLICATES) - set(found["duplicates"])) == []


def test_the_checker_finds_a_planted_reexport_private_import_and_duplicate(tmp_path):
    root = tmp_path / "bertfamily"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("")
    (root / "home.py").write_text("LIMIT = 3\n\n\ndef helper():\n    pass\n\n\ndef _inner():\n    pass\n")
    (root / "sub" / "user.py").write_text(
        "from bertfamily.home import helper\n"  # never used: a re-export
        "from ..home import LIMIT, _inner\n"
        "from .. import home\n\n"
        "__all__ = ['LIMIT', 'helper', 'CAP']\n"  # LIMIT is home's (used here, exported as if this module's)
        "CAP = LIMIT\n\n\n"
        "def helper():\n    return _inner(), home._inner\n"
    )
    found = problems(root)
    assert found["reexports"] == {("bertfamily.sub.user", "helper")}
    assert found["exported"] == {("bertfamily.sub.user", "LIMIT")}
    assert found["private"] == {("bertfamily.sub.user", "_inner"), ("bertfamily.sub.user", "home._inner")}
    assert found["duplicates"] == {"helper": {"bertfamily.home", "bertfamily.sub.user"}}


def module_lengths(root: Path = ROOT) -> dict[str, int]:
    """Lines of every module of ``lib/``, ``tools/`` and ``benchmarks/``, by path from ``root``."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for folder in ("lib", "tools", "benchmarks")
        for path in sorted((root / folder).rglob("*.py"))
    }


def test_modules_are_short():
    assert {path: n for path, n in module_lengths().items() if n > MAX_LINES} == {}


def test_the_length_check_finds_a_long_module_anywhere(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "lib" / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "benchmarks" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "lib" / "pkg" / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert module_lengths(tmp_path) == {"benchmarks/short.py": MAX_LINES, "lib/pkg/sub/long.py": MAX_LINES + 1}
