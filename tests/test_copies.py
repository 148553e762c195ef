"""Copies are flagged for the instructor (bertfamily.grading.copies), read from the files alone: a
submission whose solution cells are the published reference's, and submissions identical to each
other. No kernel runs here; the rows and their marks are the grader's (these flags never change them)."""

from pathlib import Path

import nbformat

from bertfamily.grading import copies
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.student import SOLUTION, model_answer, student_version

TINY = Path(__file__).resolve().parent / "data" / "grading_tiny.ipynb"
EXERCISE = Path(__file__).resolve().parents[1] / "book" / "exercise_distilbert.ipynb"


def _write(folder: Path, name: str, nb) -> tuple[Path, str]:
    path = folder / name
    nbformat.write(nb, path)
    return path, str(path)


def _rewritten(nb, cell_id: str, source: str):
    out = nbformat.from_dict(nbformat.reads(nbformat.writes(nb), as_version=4))
    for cell in out.cells:
        if cell.get("id") == cell_id:
            cell.source = source
    return out


def test_the_reference_copied_is_flagged_and_a_blank_or_rewritten_one_is_not(tmp_path, exercise):
    reference = exercise.reference
    copied = model_answer(reference)
    solutions = [c for c in reference.cells if c.cell_type == "code" and SOLUTION in c.metadata.get("tags", [])]
    # an honest student who wrote every solution in their own words: the same names, other code
    honest = copied
    for cell in solutions:
        honest = _rewritten(honest, cell.id, "\n".join(f"{n} = None" for n in ["mine", *_names(cell)]))
    # spacing and comments do not hide a copy
    spaced = _rewritten(copied, solutions[0].id, "# my own words\n" + solutions[0].source.replace(" = ", "  =  "))
    found = [
        _write(tmp_path, f"{name}.ipynb", nb)
        for name, nb in (
            ("copied", copied),
            ("blank", student_version(reference)),
            ("honest", honest),
            ("spaced", spaced),
        )
    ]
    flags = copies.copy_flags(found, exercise)
    said = [f for f in flags[str(tmp_path / "copied.ipynb")] if "published reference" in f]
    assert len(said) == 1 and f"({len(exercise.graded)} of {len(exercise.graded)} graded tasks)" in said[0], flags
    assert any("published reference" in f for f in flags[str(tmp_path / "spaced.ipynb")]), flags
    assert str(tmp_path / "blank.ipynb") not in flags and str(tmp_path / "honest.ipynb") not in flags, flags
    # copied and spaced hold the same tokens: identical to each other, and each names the other
    assert f"identical to that of {tmp_path / 'spaced.ipynb'}" in "; ".join(flags[str(tmp_path / "copied.ipynb")])
    assert f"identical to that of {tmp_path / 'copied.ipynb'}" in "; ".join(flags[str(tmp_path / "spaced.ipynb")])


def test_the_reference_with_its_local_names_renamed_is_flagged(tmp_path, exercise):
    """Round 10's F1: the published solution with every local name changed (answers kept, the checks read
    them) got 9/9 with no flag, the reference being compared verbatim only."""
    import ast
    import re

    reference = exercise.reference
    disguised = model_answer(reference)
    renamed_any = 0
    for cell in reference.cells:
        if cell.cell_type != "code" or SOLUTION not in cell.metadata.get("tags", []):
            continue
        keep = set(_names(cell))
        stored = {
            n.id for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        source = cell.source
        for name in sorted(stored - keep):
            source, count = re.subn(rf"(?<![.\w]){name}\b", f"my_{name}", source)
            renamed_any += count
        disguised = _rewritten(disguised, cell.id, source)
    assert renamed_any > 10  # the disguise renamed names in many cells
    found = [_write(tmp_path, "disguised.ipynb", disguised)]
    (said,) = copies.copy_flags(found, exercise)[str(tmp_path / "disguised.ipynb")]
    assert "published reference's, with the variables renamed" in said, said


def _names(cell) -> list[str]:
    from bertfamily.grading.student import answers

    return answers(cell)


def test_two_identical_submissions_are_flagged_a_third_that_differs_is_not(tmp_path, exercise):
    reference = exercise.reference
    task1 = next(c for c in reference.cells if c.get("id") in exercise.tasks[0].cells and c.cell_type == "code")
    own = _rewritten(model_answer(reference), task1.id, task1.source + "\nprint('my own line')")
    other = _rewritten(own, task1.id, task1.source + "\nprint('another line')")
    found = [
        _write(tmp_path, name, nb) for name, nb in (("alice.ipynb", own), ("bob.ipynb", own), ("carol.ipynb", other))
    ]
    flags = copies.copy_flags(found, exercise)
    alice, bob = (str(tmp_path / n) for n in ("alice.ipynb", "bob.ipynb"))
    assert f"copy: its own code is identical to that of {bob}: read by hand" in flags[alice]
    assert f"copy: its own code is identical to that of {alice}: read by hand" in flags[bob]
    carol = flags[str(tmp_path / "carol.ipynb")]  # (the folder's name holds "identical": the flags' own words are read)
    assert not any(f.startswith("copy: its own code is identical") for f in carol), flags
    assert any(f.startswith("copy: ") and f"those of {alice}, as written" in f for f in carol), carol  # one line apart
    # task 1 is no longer the reference's: the flag names the others
    said = next(f for f in flags[alice] if "published reference" in f)
    assert "of task2, " in said and "task1," not in said and f"({len(exercise.graded) - 1} of" in said, said


def test_short_answers_anyone_would_write_alike_are_not_flagged(tmp_path):
    """The tiny exercise's whole solution is a dozen lines: below MIN_LINES, so two model answers and a
    copy of its reference pass without a flag."""
    exercise = Exercise.load(TINY)
    answer = model_answer(exercise.reference)
    found = [_write(tmp_path, name, answer) for name in ("a.ipynb", "b.ipynb")]
    assert copies.copy_flags(found, exercise) == {}


def test_unreadable_files_are_left_to_their_rows(tmp_path, exercise):
    (tmp_path / "empty.ipynb").write_text("", encoding="utf-8")
    (tmp_path / "link.ipynb").symlink_to(exercise_path := EXERCISE)
    assert exercise_path.is_file()
    found = [(tmp_path / "empty.ipynb", "empty.ipynb"), (tmp_path / "link.ipynb", "link.ipynb")]
    assert copies.copy_flags(found, exercise) == {}


def test_normalized_reads_magics_and_ignores_comments_and_spacing():
    assert copies.normalized("x = 1  # one\n\n") == copies.normalized("x=1")
    assert copies.normalized("%%time\nx = 1") != copies.normalized("x = 1")  # the magic is part of the code
    assert copies.normalized("def f(:\n") == ("def f(:",)  # not Python: its lines, stripped
    assert copies.code_lines("# a\n\nx = 1\n  # b\ny = 2") == 2
    huge = "x = 1\n" * 50_000  # longer than the grader parses: read as lines
    assert copies.normalized(huge) == ("x = 1",) * 50_000


def test_a_copy_run_through_a_formatter_is_flagged(tmp_path, exercise):
    """The lecturer, round 9 (problem 1): Ivan handed in Amara's code with its quotes swapped, lines joined with
    ``;``, trailing commas, parentheses and a docstring: no flag (only 2 of its 74 lines matched). Read as Python
    writes it back from its syntax tree, the two are the same code."""
    import ast
    import re

    def same(one, two):
        try:
            return ast.dump(ast.parse(one)) == ast.dump(ast.parse(two))
        except SyntaxError:
            return False

    reference = exercise.reference
    amara = ivan = model_answer(reference)
    solutions = [c for c in reference.cells if c.cell_type == "code" and SOLUTION in c.metadata.get("tags", [])]
    for number, cell in enumerate(solutions):
        own = f"{cell.source}\nprint('checked', {number})"  # her own line: no longer the reference's cell
        amara = _rewritten(amara, cell.id, own)
        formatted = own
        for change in (
            lambda s: s.replace('"', "\x00").replace("'", '"').replace("\x00", "'"),  # the quotes swapped
            lambda s: re.sub(r"(\w)\)", r"\1,)", s),  # a trailing comma in every call
            lambda s: s.replace("\n\n", "\n"),
            lambda s: re.sub(r"^(\w+) = (.+)$", r"\1 = (\2)", s, flags=re.M),  # parentheses around values
        ):
            if same(change(formatted), formatted):  # a change that would alter the code is left out
                formatted = change(formatted)
        ivan = _rewritten(ivan, cell.id, f'"""My own work."""\n{formatted}')
    found = [_write(tmp_path, f"{name}.ipynb", nb) for name, nb in (("amara", amara), ("ivan", ivan))]
    flags = copies.copy_flags(found, exercise)
    said = "; ".join(flags.get(str(tmp_path / "ivan.ipynb"), []))
    assert f"identical to that of {tmp_path / 'amara.ipynb'}" in said, flags
    assert copies.normalized("x = 'a'") != copies.normalized("x = 'b'")  # a string's value still counts
    assert copies.normalized("f(a)") != copies.normalized("f(b)") and copies.normalized("x=(1)") == copies.normalized(
        "x=1"
    )
