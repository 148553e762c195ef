"""Answers typed rather than computed: which of a student's names hold nothing but literals.

A value is a literal when it is made of numbers and text, arithmetic, literal containers, built-ins
and pure functions applied to literals (``max(42, 0)``, ``int("42")``, ``math.prod([6, 7])``), and
names (or the student's own functions) that are themselves literals: the largest such set of names
(:func:`literal_names`), whatever the wrapping. :func:`fold` gives the number an expression of
numeric literals evaluates to, so that ``66362879 + 1`` holds the answer ``66362880``.
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import re


def chain(node) -> list[str]:
    """``a.b.c`` as ['a', 'b', 'c'] (the names of an attribute chain; empty when it does not start
    with a name)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else list(reversed(parts))


def imported_names(tree) -> dict:
    """Names bound by imports in a tree, and the module each stands for."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = (
                    alias.name.split(".")[0] if not alias.asname else alias.name
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def number_of(value):
    """An int for an int, or for a string of digits (``"66362880"``); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e18:
        return int(value)
    if isinstance(value, str) and value.replace("_", "").strip().isdigit() and len(value) < 30:
        return int(value.replace("_", ""))
    return None


_CONVERSIONS = {"int", "float", "round", "abs", "str", "Decimal", "Fraction", "tensor", "array", "int64", "float64"}
#: Modules whose functions of literals give literals (``math.prod([4, 5])``).
_PURE = {"math", "operator", "numpy", "np", "statistics", "decimal", "fractions", "functools", "torch"}
#: Built-ins that give back, convert or combine the literals they are given (not ``range``, which
#: makes a sequence to compute over, nor anything that reads the world).
_BUILTINS = {
    "abs",
    "all",
    "any",
    "bin",
    "bool",
    "chr",
    "complex",
    "dict",
    "divmod",
    "float",
    "format",
    "frozenset",
    "hex",
    "int",
    "len",
    "list",
    "max",
    "min",
    "oct",
    "ord",
    "pow",
    "reversed",
    "round",
    "set",
    "sorted",
    "str",
    "sum",
    "tuple",
}


def _constant(node, known=frozenset(), text: bool = False) -> bool:
    """True for an expression computed from literals only, whatever it is wrapped in: numbers and
    arithmetic (``66_362_880 * 4 / 2**20``), a number written as text and converted
    (``int("66362880")``), built-ins and pure functions of literals (``max(42, 0)``,
    ``math.prod([4, 5])``), literal containers and their items (``[66795472][0]``), and the names in
    ``known`` (variables and functions of the student's that hold or return nothing but literals)."""

    def const(n, text=False):
        return _constant(n, known, text)

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or node.value is None:
            return text  # True, None: literals inside an expression, not answers of their own
        return isinstance(node.value, (int, float, complex)) or (text and isinstance(node.value, (str, bytes)))
    if isinstance(node, ast.Name):
        return node.id in known
    if isinstance(node, ast.UnaryOp):
        return const(node.operand, text)
    if isinstance(node, ast.BinOp):
        return const(node.left, text) and const(node.right, text)
    if isinstance(node, (ast.BoolOp, ast.Compare)):
        parts = node.values if isinstance(node, ast.BoolOp) else [node.left, *node.comparators]
        return all(const(v, True) for v in parts)
    if isinstance(node, ast.IfExp):
        return const(node.test, True) and const(node.body, text) and const(node.orelse, text)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(const(e, True) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(
            k is not None and const(k, True) and const(v, True) for k, v in zip(node.keys, node.values, strict=True)
        )
    if isinstance(node, ast.Subscript):
        return const(node.value, True) and const(node.slice, True)
    if isinstance(node, ast.Slice):
        return all(p is None or const(p, True) for p in (node.lower, node.upper, node.step))
    if isinstance(node, ast.Lambda):
        params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        return _constant(node.body, frozenset(known) - params, text)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):  # a built-in, a literal function of the student's, a conversion
            pure = node.func.id in known or node.func.id in _CONVERSIONS
        elif isinstance(node.func, ast.Attribute):  # a pure module's function, or a method of a literal
            root: ast.expr = node.func
            while isinstance(root, ast.Attribute):
                root = root.value
            pure = (isinstance(root, ast.Name) and root.id in _PURE and root.id not in known) or const(
                node.func.value, True
            )
        else:
            pure = False
        return (
            bool(pure)
            and all(const(a.value if isinstance(a, ast.Starred) else a, True) for a in node.args)
            and all(const(k.value, True) for k in node.keywords)
        )
    return False


def _returns_constants(node: ast.FunctionDef | ast.AsyncFunctionDef, known) -> bool:
    """A function of the student's whose every ``return`` gives a literal (its parameters are not)."""
    params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
    return bool(returns) and all(r.value is not None and _constant(r.value, frozenset(known) - params) for r in returns)


def is_placeholder(value) -> bool:
    """The student version's placeholder value (``x = None``): a binding that holds nothing."""
    return isinstance(value, ast.Constant) and value.value is None


def bindings(trees) -> tuple[dict, set]:
    """Every binding of a name in the student's code: ({name: [value or FunctionDef]}, the names bound
    in ways that compute (loops, imports, ``with``, parameters of functions...))."""
    values: dict[str, list] = {}
    computed: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    pairs = [(target, node.value)]
                    if (
                        isinstance(target, (ast.Tuple, ast.List))
                        and isinstance(node.value, (ast.Tuple, ast.List))
                        and len(target.elts) == len(node.value.elts)
                    ):  # a, b = 1, 2
                        pairs = list(zip(target.elts, node.value.elts, strict=False))  # a, b = 1, 2, 3 parses
                    for name, value in pairs:
                        if isinstance(name, ast.Name) and is_placeholder(value):
                            continue  # holds nothing, typed or not
                        if isinstance(name, ast.Name):
                            values.setdefault(name.id, []).append(value)
                        else:  # unpacked, or an attribute or item of something
                            computed.update(n.id for n in ast.walk(name) if isinstance(n, ast.Name))
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                values.setdefault(node.target.id, []).append(
                    ast.BinOp(left=ast.Name(id=node.target.id, ctx=ast.Load()), op=node.op, right=node.value)
                )
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                values.setdefault(node.name, []).append(node)
            elif isinstance(
                node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr, ast.withitem)
            ):
                bound = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                if bound is not None:
                    computed.update(n.id for n in ast.walk(bound) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                computed.update(imported_names(node))
            elif isinstance(node, ast.ClassDef):
                computed.add(node.name)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                computed.update(node.names)
            elif isinstance(node, ast.Delete):
                computed.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return values, computed


def literal_names(trees, given=frozenset(), budget=None) -> set:
    """The names of the student's code that hold (or, for functions, return) nothing computed from
    data: every binding of each is made of literals and of such names (the largest such set). The
    ``given`` names (the data the course's own cells bind) are not literals, whoever binds them.

    A worklist: each name's bindings are read once, and again only when a name they mention stops
    being a literal, so a chain of 84,000 ``aN = aN-1`` costs one pass, not one pass per link.
    ``budget`` (a :class:`~bertfamily.grading.budget.Budget`) is asked at each step."""
    values, computed = bindings(trees)
    computed |= set(given)
    known = (set(values) | _BUILTINS) - computed  # a built-in the student rebinds is the student's
    users: dict = {}  # name -> the names whose bindings mention it
    for name in known:
        for value in values.get(name, ()):
            for node in ast.walk(value):
                if isinstance(node, ast.Name) and node.id != name:
                    users.setdefault(node.id, set()).add(name)
    pending = sorted(known)  # a stack (a set's pop() rescans its table: quadratic after many removals)
    queued = set(pending)
    while pending:
        if budget is not None:
            budget.check()
        name = pending.pop()
        queued.discard(name)
        if name not in known or all(
            _returns_constants(value, known)
            if isinstance(value, (ast.FunctionDef, ast.AsyncFunctionDef))
            else _constant(value, known)
            for value in values.get(name, ())
        ):
            continue
        known.discard(name)
        for user in users.get(name, ()):
            if user in known and user not in queued:
                queued.add(user)
                pending.append(user)
    return known - (_BUILTINS - set(values))


_OPS = None


def _fold_node(node, value_of):
    """The number ``node`` evaluates to, its children's numbers given by ``value_of`` (None: not one)."""
    import operator

    global _OPS
    if _OPS is None:
        _OPS = {
            ast.Add: operator.add,
            ast.Sub: operator.sub,
            ast.Mult: operator.mul,
            ast.Div: operator.truediv,
            ast.FloorDiv: operator.floordiv,
            ast.Mod: operator.mod,
            ast.Pow: operator.pow,
        }
    try:
        if isinstance(node, ast.Constant):
            value = number_of(node.value)
            return value if value is None or abs(value) < 1e18 else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value_of(node.operand)
            return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = value_of(node.left), value_of(node.right)
            if left is None or right is None or (isinstance(node.op, ast.Pow) and abs(right) > 64):
                return None
            value = _OPS[type(node.op)](left, right)
            return value if isinstance(value, (int, float)) and abs(value) < 1e18 else None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and len(node.args) == 1
            and node.func.id in ("int", "float", "round")
            and not node.keywords
        ):
            return value_of(node.args[0])
    except (ArithmeticError, ValueError, TypeError):
        return None
    return None


def fold(node):
    """The number an expression of numeric literals evaluates to (None when it is not one, or too
    large to be an answer)."""
    return _fold_node(node, fold)


def folded(node):
    value = fold(node)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def all_folded(tree) -> dict:
    """{id(node): number} for every node of ``tree`` that evaluates to a number, at any depth
    (``0 * len(w) + 66362880`` holds 66362880): one pass, children before parents, no recursion."""
    values: dict[int, object] = {}
    stack = [(tree, False)]
    while stack:
        node, done = stack.pop()
        if not done:
            stack.append((node, True))
            stack.extend((child, False) for child in ast.iter_child_nodes(node))
            continue
        value = _fold_node(node, lambda child: values.get(id(child)))
        if value is not None:
            values[id(node)] = int(value) if isinstance(value, float) and value.is_integer() else value
    return values


#: Characters of one text the grader reads for numbers (a cell's source, its metadata).
MAX_TEXT = 200_000
_DIGITS = re.compile(r"\d(?:[\d_,.' \u00a0\u202f]{0,3}\d)*")


def expected_in_text(text, expected) -> list[int]:
    """The numbers the checks expect written in ``text`` (``66362880``, ``66,362,880``, ``66_362_880``,
    ``66 362 880``)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    found = []
    for match in _DIGITS.finditer(text[:MAX_TEXT]):
        digits = re.sub(r"\D", "", match.group(0))
        if digits and len(digits) < 20 and int(digits) in expected and int(digits) not in found:
            found.append(int(digits))
    return found


def in_text_cells(nb, exercise, expected, budget=None) -> list[str]:
    """Where the notebook keeps a number the checks expect outside its code: Markdown and raw cells the
    student wrote (a number read back from the notebook's own file at run time), cells' metadata and
    attachments (but an image's bytes, :func:`_without_images`), the notebook's metadata. The course's own
    cells, and outputs (where an honest run prints its answers), are not read."""
    course = {c.get("id"): c.source for c in exercise.reference.cells}
    said = []
    for index, cell in enumerate(nb.cells):
        kept = {"metadata": cell.get("metadata"), "attachments": _without_images(cell.get("attachments"))}
        text = json.dumps(kept, default=str)
        if cell.cell_type != "code" and course.get(cell.get("id")) != cell.source:
            text += "\n" + cell.source
        if budget is not None:
            budget.take(len(text))
        numbers = expected_in_text(text, expected)
        if numbers:
            said.append(
                f"cell {index} ({cell.cell_type}) holds the number {numbers[0]!r} outside its code, an "
                "answer the checks expect (read back from the notebook's file?)"
            )
    numbers = expected_in_text(json.dumps(nb.get("metadata", {}), default=str), expected)
    if numbers:
        said.append(f"the notebook's metadata holds the number {numbers[0]!r}, an answer the checks expect")
    return said


#: The first bytes of the images Jupyter and Colab store when a screenshot is pasted into a Markdown cell.
IMAGE_MAGIC = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF8",
    "image/webp": b"RIFF",
}
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


def _without_images(attachments):
    """``attachments`` with each image that is one (base64 of a PNG, JPEG, GIF or WebP, as a pasted screenshot) left
    out: its bytes are no text a number is read from, and a screenshot of a megabyte would otherwise use up the
    grader's reading of the notebook. Anything else, text stored under an image's type among it, is kept."""
    if not isinstance(attachments, dict):
        return attachments
    return {
        name: {m: d for m, d in bundle.items() if not _an_image(m, d)} if isinstance(bundle, dict) else bundle
        for name, bundle in attachments.items()
    }


def _an_image(mime, data) -> bool:
    if mime not in IMAGE_MAGIC or not isinstance(data, str) or not _BASE64.fullmatch(data):
        return False
    try:
        return base64.b64decode(data)[: len(IMAGE_MAGIC[mime])] == IMAGE_MAGIC[mime]
    except (binascii.Error, ValueError):
        return False
