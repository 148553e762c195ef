"""IPython's magics as the grader reads them: the Python code that a magic's line or body runs
(``%time``, ``%%capture``, ``%config``), parsed with the cell's own code, and the cell parsed within
a budget of characters (:data:`MAX_SOURCE`)."""

from __future__ import annotations

import ast
import functools
import re

from bertfamily.grading.denylist import LOOKING_COMMANDS, PIP


def on_ipython(func) -> bool:
    value = func.value
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "get_ipython"


#: IPython magics whose line or body is Python code the kernel runs: the grader reads that code as
#: the cell's own (with the options each takes an argument for, which are not code).
CODE_MAGICS = {"time": "", "timeit": "nrp", "prun": "DlsT", "capture": None, "debug": ""}
#: ``%config`` executes its line (``%config A.b = expr``): read as code too.
CODE_MAGICS["config"] = ""
#: Magics that run no Python code of the student's: displays, plots, installs, settings. (Their line
#: is still code where it holds ``{expr}``, which IPython evaluates in every line: :func:`expansions`.)
MAGICS = {
    "matplotlib",
    "pip",
    "conda",
    "load_ext",
    "reload_ext",
    "autoreload",
    "aimport",
    "env",
    "cd",
    "pwd",
    "ls",
    "who",
    "whos",
    "precision",
    "xmode",
    "html",
    "HTML",
    "javascript",
    "js",
    "latex",
    "markdown",
    "svg",
}
MAX_MAGIC_DEPTH = 8


#: Lines of magics or shell commands in one cell the grader translates (IPython's translation costs the
#: square of their number, and gives up after 500): an honest cell has a few.
MAX_MAGIC_LINES = 100
#: IPython translates one such line a pass, each pass reading the whole cell again: their number times the
#: cell's characters is bounded too (red team 14: 499 lines of ``/f 1`` in 190,000 characters took 291 s;
#: 10 lines in 50,000 characters take about 1.3 s of CPU, so the bound about 2.5 s; an honest cell has a few lines
#: in a few thousand characters).
MAX_MAGIC_WORK = 1_000_000
#: A line IPython rewrites: one that starts with ``!``, ``%``, ``?``, or autocall's ``/``, ``,`` or ``;``, or
#: assigns one (``x = !ls``). The assigned names start with a character that is no space: a pattern in which
#: two parts could both take a line's leading spaces tried every split of them (a line of 200,000 spaces cost
#: 39 s). And a line that ends with ``?`` (help: ``model?``).
_MAGIC_LINE = re.compile(r"^[ \t]*(?:[\w.,\[\]][\w.,\[\] \t]*=[ \t]*)?[!%?/,;]|\?[ \t]*$", re.MULTILINE)


@functools.lru_cache(maxsize=256)  # cells of up to MAX_SOURCE characters: at most ~100 MB kept
def as_python(source: str) -> str:
    """A cell's code as Python (IPython's ``!`` and ``%`` lines as the calls they become); :class:`Unreadable`
    past :data:`MAX_MAGIC_LINES` such lines, or where IPython gives up."""
    from IPython.core.inputtransformer2 import TransformerManager

    lines = len(_MAGIC_LINE.findall(source))
    if lines > MAX_MAGIC_LINES:
        raise Unreadable(f"more than {MAX_MAGIC_LINES} lines of magics or shell commands")
    if lines * len(source) > MAX_MAGIC_WORK:
        raise Unreadable(f"{lines} lines of magics or shell commands in {len(source):,} characters")
    try:
        return TransformerManager().transform_cell(source)
    except Exception as exc:  # IPython's translation is not total: "still changing after 500 iterations", an IndexError
        raise Unreadable(f"IPython could not translate it ({type(exc).__name__}: {str(exc)[:80]})") from None


class Unreadable(Exception):
    """Code the grader cannot read: too long or too deeply nested to parse."""


MAX_SOURCE = 200_000  # characters of one cell the grader parses (a long solution is a few thousand)


def cell_tree(source: str):
    """The AST of a cell, the code its magics run included (:func:`read_cell`), or None when it is not
    Python (the run reports that); :class:`Unreadable` when it is too large or deep to parse, which is
    read by hand."""
    return read_cell(source)[0]


def magic_call(node) -> tuple[str, str, str | None] | None:
    """(name, line, body or None) of a magic IPython runs (``get_ipython().run_cell_magic('time', '',
    'x = 1')``) whose arguments are written out; None for any other node."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and on_ipython(node.func)
        and node.func.attr in ("run_line_magic", "run_cell_magic")
        and not node.keywords
    ):
        texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if len(texts) == len(node.args) == (2 if node.func.attr == "run_line_magic" else 3):
            return texts[0], texts[1], texts[2] if len(texts) == 3 else None
    return None


def _first_word(text: str) -> tuple[str, str]:
    parts = text.strip().split(None, 1)
    return (parts[0], parts[1] if len(parts) == 2 else "") if parts else ("", "")


def _without_options(line: str, takes: str) -> str:
    """A magic's line without its leading options (``-n 1 -r3 -q f(x)`` -> ``f(x)``); ``takes``: the
    options whose argument is the next word."""
    rest = line.strip()
    while rest.startswith("-") and len(rest) > 1 and not rest[1].isspace():
        flag, rest = _first_word(rest)
        if len(flag) == 2 and flag[1] in takes:
            _, rest = _first_word(rest)
    return rest


def expansions(line: str) -> list[str] | None:
    """The Python expressions IPython may evaluate in a magic's line before it runs (``{expr}``, as
    ``str.format`` does; ``{{`` is a brace): None when a brace is left unbalanced."""
    found, depth, start, i = [], 0, 0, 0
    while i < len(line):
        if depth == 0 and line.startswith(("{{", "}}"), i):
            i += 2
            continue
        if line[i] == "{":
            depth += 1
            start = i + 1 if depth == 1 else start
        elif line[i] == "}" and depth:
            depth -= 1
            if depth == 0 and line[start:i].strip():
                found.append(f"({line[start:i]})")
        i += 1
    return None if depth else found


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def magic_code(name: str, line: str, body: str | None) -> list[str] | None:
    """The Python code a magic runs (its line's ``{expr}`` expansions, its line, its body): [] for a
    magic that runs none, None for one that runs code the grader cannot read (a shell, another
    interpreter, a file, an expansion that is not Python)."""
    expanded = expansions(line)
    takes = CODE_MAGICS.get(name)  # the options of a magic whose line is code; None: its line is not code
    if takes is not None:  # a line of code may hold braces of its own (a dict): read what parses
        expanded = [e for e in expanded or [] if _parses(e)]
    elif expanded is None:
        return None
    if name in MAGICS:
        return expanded
    if name not in CODE_MAGICS:
        return None
    code = [_without_options(line, takes)] if takes is not None else []
    return [c for c in expanded + code + [body or ""] if c.strip()]


def read_cell(source: str, depth: int = 0):
    """(the AST of a cell with the code of its magics appended, the magics whose code it cannot read)."""
    if len(source) > MAX_SOURCE:
        raise Unreadable(f"{len(source):,} characters")
    try:
        tree = ast.parse(as_python(source))
    except (SyntaxError, ValueError):
        return None, []
    except (RecursionError, MemoryError) as exc:
        raise Unreadable("nested too deeply") from exc
    inner, unread = [], []
    for node in ast.walk(tree):
        found = magic_call(node)
        if found is None:
            continue
        name, line, body = found
        code = magic_code(name, line, body)
        if code is None or (code and depth >= MAX_MAGIC_DEPTH):
            unread.append(f"%%{name}" if body is not None else f"%{name}")
            continue
        for piece in code:
            sub, more = read_cell(piece, depth + 1)
            if sub is None:  # code that is not Python: read by hand
                unread.append(f"%%{name}" if body is not None else f"%{name}")
            else:
                inner += sub.body
                unread += more
    tree.body += inner
    return tree, unread


def plain_shell_line(node) -> bool:
    """``!pip install -q x`` (Colab's usual first line), or a command that only looks (:data:`LOOKING_COMMANDS`,
    ``!ls -lh {workdir}``), with no other shell command chained and no field but a plain name."""
    line = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
    if not isinstance(line, str) or any(c in line for c in ";&|`$<>\n"):
        return False
    plain = re.sub(r"\{[A-Za-z_]\w*\}", "", line)  # IPython fills {name} from the namespace; {f(x)} runs f
    command = (line.split() or [""])[0]
    return line.strip().startswith(PIP) or (command in LOOKING_COMMANDS and "{" not in plain)
