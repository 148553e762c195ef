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

from bertfamily.grading.student import SOLUTION, _tags

#: Modules no solution of the exercise needs, and what importing them can do to a graded run.
MODULES = {"gc": "reach any object of the interpreter", "ctypes": "write the interpreter's memory",
           "runpy": "run the grader's exporter", "importlib": "swap modules", "builtins": "replace built-ins",
           "subprocess": "run programs", "signal": "signal processes", "socket": "open sockets",
           "pty": "open terminals", "multiprocessing": "start processes", "_thread": "start threads",
           "threading": "start threads", "sys": None, "os": None, "IPython": "reach the kernel's machinery"}
NAMES = {"__builtins__": "touches the built-ins", "__import__": "imports by name", "exec": "runs code from a string",
         "eval": "runs code from a string", "compile": "compiles code from a string",
         "get_ipython": "reaches the kernel's machinery", "setattr": "sets attributes by name",
         "delattr": "deletes attributes by name", "globals": "edits the namespace by name",
         "publish_display_data": "publishes raw display messages"}
ATTRIBUTES = {("sys", "modules"), ("sys", "settrace"), ("sys", "setprofile"), ("sys", "displayhook"),
              ("sys", "excepthook"), ("sys", "addaudithook"), ("os", "fork"), ("os", "forkpty"), ("os", "kill"),
              ("os", "killpg"), ("os", "system"), ("os", "popen"), ("os", "setsid"), ("os", "execv"),
              ("os", "execve"), ("os", "execvp"), ("os", "posix_spawn"), ("os", "spawnv")}
STRINGS = ("/proc", "/grader", "bertfamily-grade", "vnd.bertfamily", "/sys/", "/dev/shm")
#: What a solution may call on ``checks`` (the exercise's own check cells call the rest).
CHECKS_ALLOWED = ("check_", "for_the_instructor")
#: IPython magics that honest solutions use (timing, plots, installs); any other escape is read.
MAGICS = {"timeit", "time", "matplotlib", "pip", "load_ext", "autoreload", "config"}


def _python(source: str) -> str:
    """A cell's code as Python (IPython's ``!`` and ``%`` lines as the calls they become)."""
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(source)


def authored(nb, exercise) -> list[tuple[int, str]]:
    """The code the student wrote, as (cell index, source): solution cells, added cells and course cells
    the student changed; never the course's own cells, restored checks or their copies."""
    course = {c.id: c.source for c in exercise.reference.cells
              if c.cell_type == "code" and SOLUTION not in _tags(c)}
    found = []
    for index, cell in enumerate(nb.cells):
        cid = cell.get("id") or ""
        if cell.cell_type != "code" or course.get(cid) == cell.source or cid.endswith("-course"):
            continue
        found.append((index, cell.source))
    return found


def _imported(tree) -> dict:
    """Names bound by imports in a tree, and the module each stands for."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0] if not alias.asname \
                    else alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def suspicious(nb, exercise) -> list[str]:
    """Where the student's own code does what no solution needs (see the module docstring)."""
    said, imported = [], {}
    for cell in nb.cells:  # the names modules have anywhere in the notebook (checks: the course's cell)
        if cell.cell_type == "code":
            try:
                imported.update(_imported(ast.parse(_python(cell.source))))
            except (SyntaxError, ValueError):
                pass
    for index, source in authored(nb, exercise):
        try:
            tree = ast.parse(_python(source))
        except (SyntaxError, ValueError):
            continue  # the run reports the error
        found = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for module in modules:
                    why = MODULES.get(module.split(".")[0])
                    if why:
                        found.append(f"imports {module} ({why})")
            elif isinstance(node, ast.Name) and node.id in NAMES:
                found.append(f"uses {node.id} ({NAMES[node.id]})")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                base = imported.get(node.value.id, node.value.id)
                if (base.split(".")[0], node.attr) in ATTRIBUTES:
                    found.append(f"uses {base}.{node.attr}")
                elif base.endswith("checks") and not node.attr.startswith(CHECKS_ALLOWED) and not node.attr.isupper():
                    found.append(f"asks bertfamily.checks for {node.attr} (the answer key)")
                elif node.attr in ("run_line_magic", "run_cell_magic", "system", "getoutput"):
                    pass  # said below with the magic's name
                if isinstance(node.ctx, (ast.Store, ast.Del)) and node.value.id in imported:
                    found.append(f"replaces {imported[node.value.id]}.{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and any(s in node.value for s in STRINGS):
                found.append(f"names {node.value[:40]!r}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("system", "getoutput") and _on_ipython(node.func):
                found.append("runs a shell command (!)")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("run_line_magic", "run_cell_magic") and _on_ipython(node.func) \
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value not in MAGICS:
                found.append(f"runs the magic %{node.args[0].value}")
        found = [f for f in dict.fromkeys(found) if not (f.startswith("uses get_ipython") and _only_magics(tree))]
        if found:
            more = f" and {len(found) - 4} more" if len(found) > 4 else ""
            said.append(f"cell {index} " + ", ".join(found[:4]) + more)
    return said


def _on_ipython(func) -> bool:
    value = func.value
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "get_ipython"


def _only_magics(tree) -> bool:
    """True when every use of get_ipython is a magic that honest solutions use (IPython writes ``%timeit``
    as ``get_ipython().run_line_magic('timeit', ...)``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "get_ipython":
            parent = next((p for p in ast.walk(tree) if isinstance(p, ast.Attribute) and p.value is node), None)
            call = next((c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.func is parent), None)
            if parent is None or parent.attr not in ("run_line_magic", "run_cell_magic") or call is None \
                    or not call.args or not isinstance(call.args[0], ast.Constant) or call.args[0].value not in MAGICS:
                return False
    return True


def _constant(node) -> bool:
    """True for an expression made of number literals and arithmetic only (``66_362_880 * 4 / 2**20``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    if isinstance(node, ast.BinOp):
        return _constant(node.left) and _constant(node.right)
    return False


def typed_answers(nb, exercise, answers: dict) -> dict:
    """The answers the student typed as numbers: {name: cell index} for each name in ``answers`` (the
    names the checks read) whose every assignment in the student's code is a number literal."""
    typed, computed = {}, set()
    for index, source in authored(nb, exercise):
        try:
            tree = ast.parse(_python(source))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in answers and _constant(node.value):
                        typed.setdefault(target.id, index)
                    else:  # computed, unpacked, or an attribute or item of something
                        computed.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.AugAssign, ast.For, ast.comprehension, ast.NamedExpr, ast.withitem)):
                target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                if target is not None:
                    computed.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                computed.update(_imported(node))
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                computed.add(node.name)
    return {name: index for name, index in typed.items() if name not in computed}
