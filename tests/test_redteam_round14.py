"""Red team round 14 (a helper in a malicious student's place; its notebooks under /tmp/rt14): the grader's own reading
of a submission stays bounded and total."""

import ast

import pytest

from bertfamily.grading import copies, magics
from bertfamily.grading.magics import Unreadable, as_python


def test_every_line_ipython_rewrites_counts_against_the_magics_bound():
    """Finding 1 (HIGH): autocall (``/f 1``, ``,f 1``, ``;f 1``) and help (``a?``, ``?a``) lines were not counted, and
    IPython rewrites one a pass over the whole cell: 499 of them in 190,000 characters took 291 s of the grader's
    CPU, in the pool's worker and again in the copy check. Each kind now counts, and so does the cell's size."""
    for line in ("/f 1", ",f 1", ";f 1", "a?", "?a", "x = !ls", "%time 1"):
        with pytest.raises(Unreadable, match="more than 100 lines"):
            as_python("f = print\n" + f"{line}\n" * 101)
    code = "a = (1, 2, 3, 4, 5, 6, 7, 8, 9)\n" * 1600  # 51,200 characters: 20 such lines are past the bound
    with pytest.raises(Unreadable, match="20 lines of magics or shell commands in"):
        as_python("f = print\n" + "/f 1\n" * 20 + code)
    assert "get_ipython().system('ls')" in as_python("!ls\n" + code[:2000])  # an honest cell's few lines, read
    assert "(1, 2" in copies.canonical("x = !ls\n" + code)  # past the bound: the cell as it is, not an error


def test_an_ipython_translation_that_fails_is_unreadable_not_a_grader_failure():
    """Finding 3 (HIGH): IPython's translation raised IndexError on ``#`` then ``x2=%\"\"\"``; the row became 'the
    grader failed on it' with no score, for a notebook whose tasks all passed."""
    cell = '#\nx2=%"""'
    with pytest.raises(Unreadable, match="IPython could not translate it"):
        as_python(cell)
    assert copies.canonical(cell) == cell  # the copy check reads it as it is
    with pytest.raises(Unreadable):  # the code reader says "cell N cannot be read by the grader", and grades the rest
        magics.read_cell(cell)


def test_adjacent_strings_are_joined_in_one_pass(monkeypatch):
    """Finding 2 (HIGH): a run of adjacent string literals was joined two at a time, each join reading the whole
    string again (66,000 of them in a cell that does not parse: 140 s of the grader's main process). Each literal is
    now read once: the characters read are the source's, not their square."""
    read = []
    literal_eval = ast.literal_eval

    def counted(text):
        read.append(len(text))
        return literal_eval(text)

    monkeypatch.setattr(copies.ast, "literal_eval", counted)
    cell = "x2 = " + "'ab' " * 2000 + "\n$\n"  # '$': not Python, read as tokens
    (tokens,) = [copies.normalized(cell)]
    assert ("STRING", repr("ab" * 2000)) in [(copies.tokenize.tok_name[k], t) for k, t in tokens if k != 0], tokens[:5]
    assert sum(read) <= 2 * len(cell), sum(read)
    assert copies.normalized("x = 'a' \"b\" 'c'\n") == copies.normalized("x = 'abc'\n")
    assert copies.normalized("x = b'a' 'b'\n") != copies.normalized("x = 'ab'\n")  # bytes then text: not one string


def test_a_folder_named_as_a_roster_student_is_that_students_whatever_the_file_is_called(tmp_path):
    """Finding 4 (MEDIUM): with a folder per student named as the roster names them (a shared drive's "Bob Good/"), the
    file name decided: Mallory's ``20002_exercise.ipynb`` in her own folder counted as Bob's and replaced his grade
    in the Canvas import. The folder that names one roster student is that student's."""
    from bertfamily import grading
    from bertfamily.grading import lms

    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\n20001,Alice Fine\n20002,Bob Good\n20003,Mallory  evil\n", encoding="utf-8")
    root = tmp_path / "submissions"
    for folder, name in (("Alice Fine", "20001"), ("Bob Good", "20002"), ("Mallory Evil", "20002")):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / f"{name}_exercise.ipynb").write_text("{}", encoding="utf-8")
    students = grading.read_roster(roster)
    owners = {f.path.parent.name: lms.roster_match(f, students)[0] for f in lms.find([root])}
    assert owners == {"Alice Fine": "20001", "Bob Good": "20002", "Mallory Evil": "20003"}, owners


def test_two_students_who_add_the_same_line_to_a_course_cell_are_not_copies(exercise, tmp_path):
    """Finding 7 (MEDIUM): a course cell with one line added counted in full as the student's own code; two students
    who both added ``!pip install -q transformers`` to the set-up cell and ``import numpy as np`` to the imports were
    flagged as copies of each other, the course's 23 lines counted as theirs. Only the lines a student adds to a
    course cell are theirs; two copies of the solutions are still found."""
    import nbformat

    from bertfamily.grading import copies, model_answer, student_version

    def handed(nb, name):
        course = [c for c in nb.cells if c.cell_type == "code" and "solution" not in c.metadata.get("tags", [])]
        course[0].source = "!pip install -q transformers\n" + course[0].source
        course[1].source = course[1].source + "\nimport numpy as np"
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
        return tmp_path / f"{name}.ipynb", name

    blank = [handed(student_version(exercise.reference), name) for name in ("ana", "ben")]
    assert [sum(n for _, n in copies.own_code(nbformat.read(p, 4), exercise)) for p, _ in blank] == [2, 2]
    assert copies.copy_flags(blank, exercise) == {}
    solved = [handed(model_answer(exercise.reference), name) for name in ("cy", "dee")]
    flags = copies.copy_flags(solved, exercise)
    assert set(flags) == {"cy", "dee"} and "identical" in " ".join(flags["cy"]), flags


def test_a_copy_with_a_line_added_to_each_cell_or_its_cells_cut_is_still_a_copy(exercise, tmp_path):
    """Finding 6 (MEDIUM): copies were compared whole cell by whole cell, so the published reference with
    ``_ = None`` added at the top of each solution cell, or each solution cell cut in two, got no flag, against the
    reference or against each other. Statements are now compared as written, whatever the cells."""
    import nbformat

    from bertfamily.grading import copies, model_answer

    solutions = {c.get("id") for c in exercise.reference.cells if "solution" in c.metadata.get("tags", [])}

    def handed(name, change):
        nb = model_answer(exercise.reference)
        cells = []
        for cell in nb.cells:
            if cell.get("id") in solutions and cell.cell_type == "code":
                cell.source, cut = change(cell.source)
                if cut:
                    cells.append(nbformat.v4.new_code_cell(cut))
            cells.append(cell)
        nb.cells = cells
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
        return tmp_path / f"{name}.ipynb", name

    def halves(source):
        lines = source.split("\n")
        return "\n".join(lines[len(lines) // 2 :]), "\n".join(lines[: len(lines) // 2])

    found = [handed("plus", lambda s: ("_ = None\n" + s, "")), handed("cut", halves)]
    flags = copies.copy_flags(found, exercise)
    for name in ("plus", "cut"):
        assert any("statements of the published reference's solutions are in its code" in f for f in flags[name]), flags
    again = copies.copy_flags([*found, handed("plus2", lambda s: ("__ = 0\n" + s, ""))], exercise)
    assert any("statements are those of plus2, as written" in f for f in again["plus"]), again  # and each other
