"""Copies, for the instructor to read: a submission whose solution cells are the published reference's,
and submissions whose own code is identical to each other's. Flags, never marks: a copied answer that
computes the right value still earns its marks, and the instructor decides.

What is compared is the student's own code: every code cell of the submission that is neither one of
the course's cells (set-up, checks) nor a placeholder of the student version, read as Python tokens
(comments, blank lines and spacing do not count; IPython's magics as the calls they become). Answers
short enough that anyone would write them alike are not flagged: a row is flagged only when the code
in common has at least :data:`MIN_LINES` lines (the course's exercise: about 70 lines of solutions in
its graded tasks). Only the submissions of one run are compared with each other. A submission whose
code is past the grader's reading budget (:mod:`bertfamily.grading.budget`) is not compared: its row
already says it was not read.
"""

from __future__ import annotations

import ast
import builtins
import functools
import io
import keyword
import re
import tokenize
from collections import Counter, defaultdict

from bertfamily.grading.budget import Budget
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.magics import MAX_SOURCE, Unreadable, as_python
from bertfamily.grading.safeio import read_regular
from bertfamily.grading.student import SOLUTION, cell_tags, placeholder
from bertfamily.grading.submission import MAX_NOTEBOOK_BYTES, Invalid, link_problem, read_submission

#: Lines of code in common (not comments, not blank) below which nothing is flagged.
MIN_LINES = 20
#: The share of two submissions' own code (the larger's) that must be the same, cell by cell once renamed, for
#: a pair whose code is not the same as a whole to be flagged (a copy with a line added or changed): honest work
#: written from the same lessons shared 65-70% of its lines in the lecturers' test classes.
NEAR_SHARE = 0.9
#: Of the statements as written (names too), the share two submissions must have in common, cell boundaries aside
#: (red team 14: the reference with a line added to each cell, or each cell cut in two, was no copy cell by cell).
STATED_SHARE = 0.75
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


def normalized(source: str) -> tuple:
    """A cell's code as the tokens Python reads, as a formatter leaves them: comments, blank lines, spacing,
    line breaks and indentation left out (``def f(x): return x`` on one line or two), ``;`` read as a line's
    end, a string by its value (``'x'``, ``"x"`` and ``"x" ""`` alike), a statement that is only a string (a
    docstring) and a comma before a closing bracket dropped (a cell too long to parse, or not Python: its
    lines, stripped)."""
    if len(source) > MAX_SOURCE:
        return tuple(line.strip() for line in source.splitlines() if line.strip())
    try:
        code = canonical(source)
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in _SKIP]
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError, RecursionError, Unreadable):
        return tuple(line.strip() for line in source.splitlines() if line.strip())
    out: list[tuple[int, str]] = []
    joined: dict[int, list[str]] = {}  # a string of ``out`` (its index) -> the values of the adjacent strings it is
    start = 0  # where the statement being read starts in ``out``
    for t in tokens:
        kind, text = t.type, t.string
        if kind in (tokenize.INDENT, tokenize.DEDENT):
            continue
        if kind == tokenize.NEWLINE or (kind == tokenize.OP and text == ";"):
            if len(out) - start == 1 and out[-1][0] == tokenize.STRING:
                joined.pop(len(out) - 1, None)
                out.pop()  # a statement that is only a string: a docstring, a note
            if out and out[-1][0] != tokenize.NEWLINE and out[-1] != (tokenize.OP, ":"):
                out.append((tokenize.NEWLINE, ""))
            start = len(out)
            continue
        if kind == tokenize.OP and text in ")]}" and out and out[-1] == (tokenize.OP, ","):
            out.pop()  # a trailing comma
        if kind == tokenize.STRING:
            text, value = _string(text)
            if value is not None and out and len(out) - 1 in joined:  # "a" "b": one string, written once at the end
                joined[len(out) - 1].append(value)
                continue
            if value is not None:
                joined[len(out)] = [value]
        out.append((kind, text))
    for index, values in joined.items():  # joined in one pass: a run of n strings costs n, not n squared
        if len(values) > 1:
            out[index] = (tokenize.STRING, repr("".join(values)))
    return tuple(out)


@functools.lru_cache(maxsize=256)  # read twice a cell (its tokens, its lines), as as_python is cached
def canonical(source: str) -> str:
    """A cell's code (its magics as the calls they become) as Python writes it back from its syntax tree
    (``ast.unparse``): one statement a line, the parentheses a formatter adds and its quotes left out; a cell
    that is not Python (or too long to read): as it is."""
    if len(source) > MAX_SOURCE:
        return source
    try:
        code = as_python(source)
    except Unreadable:
        return source
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code


def _string(text: str) -> tuple[str, str | None]:
    """A string token by its value (its ``repr``), and that value where it is text (adjacent ones are joined:
    ``"a" "b"``); an f-string with its prefix and its fields as written, in double quotes, and no value."""
    prefix = text[: len(text) - len(text.lstrip("rRbBuUfF"))]
    if "f" in prefix.lower():
        body = text[len(prefix) :]
        quote = 3 if body[:3] in ('"""', "'''") else 1
        return prefix.lower() + '"' + body[quote:-quote] + '"', None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text, None
    return repr(value), value if isinstance(value, str) else None


def renamed(cells: tuple, imported: frozenset = frozenset()) -> tuple:
    """Normalized cells (:func:`normalized`) with the names in each cell replaced, in order of first use in
    that cell, by ``v0``, ``v1``...: a copy whose variables were renamed reads the same. Keywords,
    built-ins, attributes (``model.parameters``) and every name an import binds (``torch``, ``np``,
    ``AutoModel``), in these cells or in ``imported``, keep their names: code with other libraries or
    classes is other code."""
    known = set(imported) | _imported(cells)
    out = []
    for cell in cells:
        names: dict[str, str] = {}
        tokens, before = [], None
        for token in cell:
            kind, text = token if isinstance(token, tuple) else (None, token)
            if kind == tokenize.NAME and before != ".":
                token = (kind, _rename(text, names, known))
            elif kind == tokenize.STRING and "f" in text[: text.find(text[-1])].lower():
                # Python 3.11 reads an f-string as one token: the names of its {fields} are renamed too
                parts = re.split(r"(?<!\{)\{(?!\{)([^{}]*)\}", text)  # text, field, text, ... ({{ is no field)
                for i in range(1, len(parts), 2):
                    parts[i] = re.sub(
                        r"(?<![.\w])[A-Za-z_]\w*", lambda m, seen=names: _rename(m[0], seen, known), parts[i]
                    )
                token = (kind, "{}".join(parts[::2]) + "|" + "|".join(parts[1::2]))
            tokens.append(token)
            before = text
        out.append(tuple(tokens))
    return tuple(out)


def _imported(cells: tuple) -> set:
    """The names the import statements of normalized ``cells`` bind."""
    imported = set()
    for cell in cells:
        inside = False
        for token in cell:
            kind, text = token if isinstance(token, tuple) else (None, token)
            if kind == tokenize.NAME and text in ("import", "from"):
                inside = True
            elif kind in (tokenize.NEWLINE, tokenize.OP) and text in ("\n", ";", ""):
                inside = False
            elif inside and kind == tokenize.NAME:
                imported.add(text)
    return imported


def _rename(name: str, names: dict, imported: set) -> str:
    """``name`` as :func:`renamed` writes it: ``v0``, ``v1``... in order of first use, but for keywords,
    built-ins and the names imports bind."""
    if keyword.iskeyword(name) or hasattr(builtins, name) or name in imported:
        return name
    return names.setdefault(name, f"v{len(names)}")


def code_lines(source: str) -> int:
    """The lines of a cell that are code: not blank, not a comment."""
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def _graded_solutions(exercise: Exercise) -> dict:
    """{normalized code: (task name, its code lines)} of the reference's solution cells in graded tasks."""
    by_id = {c.get("id"): c for c in exercise.reference.cells}
    found = {}
    for task in exercise.graded:
        for cid in task.cells:
            cell = by_id[cid]
            if cell.cell_type == "code" and SOLUTION in cell_tags(cell) and code_lines(cell.source):
                found[normalized(cell.source)] = (task.name, code_lines(canonical(cell.source)))
    return found


def _course_cells(exercise: Exercise) -> set:
    """The code a submission holds without the student writing any: the course's own cells, and the
    placeholders of the student version."""
    course = set()
    for cell in exercise.reference.cells:
        if cell.cell_type == "code":
            course.add(normalized(placeholder(cell) if SOLUTION in cell_tags(cell) else cell.source))
    return course


def _stripped(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]


def _course_lines(exercise: Exercise) -> list[set]:
    """The lines of each of the course's own code cells (not the solutions'), stripped, comments left out."""
    return [
        set(_stripped(c.source))
        for c in exercise.reference.cells
        if c.cell_type == "code" and SOLUTION not in cell_tags(c)
    ]


def _added(source: str, course_lines: list[set]) -> str:
    """A cell's own code: where most of its lines are one course cell's (the set-up cell with a line added, red team
    14: two students who both added ``!pip install`` were flagged as copies, the course's 23 lines counted as theirs),
    only the lines it adds; else the whole cell."""
    lines = _stripped(source)
    best = max(course_lines, key=lambda known: sum(x in known for x in lines), default=set())
    shared = sum(x in best for x in lines)
    if shared < 2 or shared * 2 < len(lines):
        return source
    return "\n".join(line for line in source.splitlines() if line.strip() not in best)


def own_code(nb, exercise: Exercise, budget: Budget | None = None) -> list[tuple[tuple, int]]:
    """The student's own code cells of ``nb``, in order: (normalized code, its code lines). ``budget`` (a
    :class:`~bertfamily.grading.budget.Budget`) is asked for the whole notebook's characters first (a notebook
    past them is refused before any cell is parsed), then for its time cell by cell: past it, ``OverBudget``."""
    course, course_lines = _course_cells(exercise), _course_lines(exercise)
    own = []
    if budget is not None:
        budget.take(sum(len(cell.source) for cell in nb.cells))
    for cell in nb.cells:
        if budget is not None:
            budget.check()
        if cell.cell_type == "code" and code_lines(cell.source):
            tokens = normalized(cell.source)
            if tokens in course:
                continue
            source = _added(cell.source, course_lines)
            if code_lines(source):  # its lines as written back: a formatter's line breaks do not count
                own.append((tokens if source is cell.source else normalized(source), code_lines(canonical(source))))
    return own


def _reference(exercise: Exercise) -> tuple[dict, dict, frozenset]:
    """What :func:`reference_copy` compares with, read once a class: the graded solutions (normalized, and
    :func:`renamed`), and the names the reference's imports bind."""
    solutions = _graded_solutions(exercise)
    imported = frozenset(_imported(tuple(normalized(c.source) for c in exercise.reference.cells)))
    return solutions, dict(zip(renamed(tuple(solutions), imported), solutions.values(), strict=True)), imported


def reference_copy(own: list, exercise: Exercise, reference: tuple | None = None) -> str | None:
    """The flag of a submission whose solution cells are the reference's, verbatim or with the variables
    renamed (:func:`renamed`, cell by cell, each of the reference's cells counted once); None if not.
    ``reference``: :func:`_reference` of ``exercise``, where a class already read it."""
    solutions, solutions_renamed, imported = reference or _reference(exercise)
    copied = [solutions[tokens] for tokens, _ in own if tokens in solutions]
    how = "verbatim"
    if sum(lines for _, lines in copied) < MIN_LINES:
        left = dict(solutions_renamed)
        copied = [left.pop(cell) for cell in renamed(tuple(t for t, _ in own), imported) if cell in left]
        how = "with the variables renamed"
    if sum(lines for _, lines in copied) < MIN_LINES:
        return None
    tasks = sorted({task for task, _ in copied}, key=lambda name: int(name.removeprefix("task")))
    return (
        f"copy: the solution cells of {', '.join(tasks)} are the published reference's, {how} "
        f"({len(tasks)} of {len(exercise.graded)} graded tasks): read by hand"
    )


def copy_flags(found, exercise: Exercise) -> dict[str, list[str]]:
    """The copy flags of a class, {submission's name in the gradebook: [flag, ...]}, for the files
    ``found`` ((path, name) pairs, as :func:`~bertfamily.grading.classroom.collect` gives them). A file
    that cannot be read as a notebook is left out (its row says why)."""
    flags, groups, renamings = defaultdict(list), defaultdict(list), defaultdict(list)
    reference = _reference(exercise)
    lined: dict[str, list] = {}  # each submission's renamed cells, with their lines of code
    stated: dict[str, list] = {}  # each submission's statements as written (a line added to each cell, a cell split)
    for path, name in found:
        try:
            if link_problem(path):
                continue
            # read as its row was: never a FIFO, a device or more than the cap (a sparse terabyte)
            nb = read_submission(read_regular(path, MAX_NOTEBOOK_BYTES), exercise.tasks, exercise.name, [])
        except (Invalid, OSError, ValueError):
            continue
        try:  # the reading's own budget, as for the code reader: a row past it (OverBudget) says "not read" already
            own = own_code(nb, exercise, Budget())
        except Exception:  # noqa: BLE001 - one file never stops the class: its row was graded and says the rest
            continue
        said = reference_copy(own, exercise, reference)
        if said:
            flags[name].append(said)
        if sum(lines for _, lines in own) >= MIN_LINES:
            cells = tuple(tokens for tokens, _ in own)
            groups[cells].append(name)
            renamings[renamed(cells)].append(name)
            lined[name] = list(zip(renamed(cells), (lines for _, lines in own), strict=True))
            stated[name] = [(statement, 1) for cells_tokens in cells for statement in _statements(cells_tokens)]
    same = set()
    for names in groups.values():
        for name in names if len(names) > 1 else ():
            others = ", ".join(n for n in names if n != name)
            flags[name].append(f"copy: its own code is identical to that of {others}: read by hand")
            same |= {(name, n) for n in names}
    for names in renamings.values():
        for name in names if len(names) > 1 else ():
            others = ", ".join(n for n in names if n != name and (name, n) not in same)
            if others:
                flags[name].append(f"copy: its own code is that of {others} with its variables renamed: read by hand")
            same |= {(name, n) for n in names}
    for name, other, common, total in _near_copies(lined, same):
        flags[name].append(
            f"copy: {common} of its {total} lines of code are those of {other} with the variables renamed: read by hand"
        )
        same.add((name, other))
    for name, other, common, total in _near_copies(stated, same, STATED_SHARE):  # red team 14: cells cut, added to
        flags[name].append(
            f"copy: {common} of its {total} statements are those of {other}, as written (its cells cut or added to): "
            "read by hand"
        )
    published = Counter(s for cell in reference[0] for s in _statements(cell))  # the graded solutions' statements
    for name, items in stated.items():
        common = sum((published & Counter(s for s, _ in items)).values())
        if common >= max(MIN_LINES, STATED_SHARE * sum(published.values())) and not any(
            f.startswith("copy: the solution cells") for f in flags[name]
        ):
            flags[name].append(
                f"copy: {common} of the {sum(published.values())} statements of the published reference's solutions "
                "are in its code, as written (its cells cut or added to): read by hand"
            )
    return dict(flags)


def _statements(tokens: tuple) -> list[tuple]:
    """A cell's normalized tokens (:func:`normalized`) cut into its statements (at each line's end)."""
    out: list[tuple] = []
    current: list = []
    for token in tokens:
        if not isinstance(token, tuple):  # a cell that is not Python is read as its lines: each one a statement
            out.append((token,))
        elif token[0] == tokenize.NEWLINE:
            if current:
                out.append(tuple(current))
            current = []
        else:
            current.append(token)
    return out + ([tuple(current)] if current else [])


def _near_copies(lined: dict, same: set, share: float = NEAR_SHARE):
    """(submission, another, lines in common, its lines) for pairs not flagged already whose renamed cells are
    the same but for a few lines (a copy with a line added): at least :data:`MIN_LINES` and
    :data:`NEAR_SHARE` of the code of each in common, cell by cell."""
    names = sorted(lined)
    for i, one in enumerate(names):
        for two in names[i + 1 :]:
            if (one, two) in same:
                continue
            left: dict[tuple, int] = defaultdict(int)
            for cell, _ in lined[two]:
                left[cell] += 1
            common = 0
            for cell, lines in lined[one]:
                if left[cell]:
                    left[cell] -= 1
                    common += lines
            sizes = {n: sum(lines for _, lines in lined[n]) for n in (one, two)}
            if common >= MIN_LINES and common >= share * max(sizes.values()):
                yield one, two, common, sizes[one]
                yield two, one, common, sizes[two]
