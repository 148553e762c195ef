"""The course published without the exercise's solutions (``make book-public``, tools/public_book.py),
and a student version that does not point at them.

The build is the real command's; then every file it wrote is read for the solutions' text
(`public_book.leaks`: each line of a solution, and each name only the solutions use). The same reader
finds them in the full website (the `book_build` fixture), so a clean result means something.
"""

from pathlib import Path

import nbformat
import pytest

from bertfamily.grading.student import SOLUTION, SOLUTIONS_NOTE, student_version
from tools import public_book

ROOT = Path(__file__).resolve().parents[1]

REFERENCE = ROOT / "book" / "exercise_distilbert.ipynb"
#: Words that point a student at the solutions.
POINTERS = ("dropdown", "click to show", "solution sits", "solutions sit", "solutions are on the website")


def _reference():
    return nbformat.read(REFERENCE, as_version=4)


def test_the_student_version_does_not_point_at_the_solutions():
    nb = student_version(_reference())
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown").lower()
    assert [p for p in POINTERS if p in text] == []
    assert not any(SOLUTIONS_NOTE in c.metadata.get("tags", []) for c in nb.cells)
    # the reference itself has such a note, for the website with solutions: it is what was dropped
    note = [c for c in _reference().cells if SOLUTIONS_NOTE in c.metadata.get("tags", [])]
    assert len(note) == 1 and "dropdown" in note[0].source


def test_the_website_version_keeps_the_tasks_and_drops_every_solution():
    reference = _reference()
    public = student_version(reference, website=True)
    assert not any(SOLUTION in c.metadata.get("tags", []) for c in public.cells)
    assert not any("{solution" in c.source for c in public.cells)
    boxes = [c for c in public.cells if c.cell_type == "markdown" and "{exercise}" in c.source]
    assert len(boxes) == sum("{exercise}" in c.source for c in reference.cells) >= 10
    assert all(not c.get("outputs") for c in public.cells if c.cell_type == "code")
    # the plain student version turns the same boxes into headings
    assert not any("{exercise}" in c.source for c in student_version(reference).cells)


def test_the_needles_are_solution_text_the_public_sources_do_not_hold():
    lines, names = public_book.solution_needles(_reference(), public_book.public_sources_text())
    assert len(lines) > 30 and 'distilbert = load("distilbert-base-uncased")' in lines
    assert "int8_path" in names and "distilbert" not in names  # a name the tasks' text uses is not a needle


@pytest.mark.book
def test_the_full_website_holds_the_solutions_where_the_reader_looks(book_build):
    """The positive control: the website with solutions is caught in its page, its .ipynb and its search index."""
    assert book_build.returncode == 0, book_build.log[-2000:]
    found = public_book.leaks(book_build.html, _reference())
    where = {line.split(": ", 1)[0] for line in found}
    assert {"book/exercise_distilbert.html", "_sources/book/exercise_distilbert.ipynb", "searchindex.js"} <= where


@pytest.mark.book
def test_make_book_public_has_no_solution_text_in_any_file(tmp_path):
    out = tmp_path / "public"
    # main's 0: public_book.leaks found no solution text in any file of out/_build (else it says where, and 1)
    assert public_book.main(["--out", str(out), "--strict"]) == 0
    site = out / "_build" / "html"
    files = [p for p in (out / "_build").rglob("*") if p.is_file()]
    assert len(files) > 100
    page = (site / "book" / "exercise_distilbert.html").read_text(encoding="utf-8")
    assert page.count("YOUR CODE HERE") >= 10 and "Count the parameters" in page  # the tasks are there
    assert "launch-buttons" not in page and "launch-buttons" in (site / "book" / "04_albert.html").read_text()
    download = nbformat.read(site / "_sources" / "book" / "exercise_distilbert.ipynb", as_version=4)
    assert not any(SOLUTION in c.metadata.get("tags", []) for c in download.cells)


def test_the_public_build_refuses_to_replace_the_sources():
    for out in (ROOT, ROOT / "book" / "x", ROOT.parent):
        with pytest.raises(ValueError, match="would replace the course's own sources"):
            public_book.build(out)
