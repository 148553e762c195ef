"""The strict build of the website is a test: warnings are errors, from an empty output folder.

The build itself is the session fixture `book_build` (tests/conftest.py), shared with the browser
tests so that one `make test` builds the book once.
"""

import re
from pathlib import Path

import nbformat
import pytest
from helpers import glue_values, toc_docs

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.book
def test_book_builds_strictly(book_build):
    assert book_build.returncode == 0, book_build.log[-4000:]
    html = book_build.html
    index = (html / "index.html").read_text(encoding="utf-8")
    assert "book/intro.html" in index  # the home page redirects to the intro
    assert "BERT" in (html / "book" / "intro.html").read_text(encoding="utf-8")
    setup = (html / "book" / "00_setup.html").read_text(encoding="utf-8")
    assert "colab.research.google.com" in setup and "mybinder.org" in setup  # launch buttons
    missing = [doc for doc in toc_docs() if not (html / f"{doc}.html").is_file()]
    assert not missing, f"pages of _toc.yml that were not built: {missing}"


def test_toc_docs_reads_every_chapter():
    docs = toc_docs()
    assert docs[0] == "book/intro" and "book/03_compression" in docs and "book/claims" in docs
    assert len(docs) == len(set(docs))


# The verdicts of book/claims.md, checked against the stored values: (words of the claim's row,
# notebook, glued key, the published figure, the unit of its last printed digit). A value agrees when
# it is within half a unit of the figure; the row must then say **agrees**, and otherwise **differs**.
CLAIMS = [
    ("classes other than the correct one", "02_distillation", "mass_T1", 7.1, 0.1),
    ("At $T = 3$ they hold", "02_distillation", "mass_T3", 49.5, 0.1),
    ("The entropy rises", "02_distillation", "entropy_T1", 0.33, 0.01),
    ("The entropy rises", "02_distillation", "entropy_T3", 1.36, 0.01),
    ("The entropy rises", "02_distillation", "entropy_max", 1.61, 0.01),
    ("BERT's masking chooses 15%", "01_dynamic_masking", "rate_chosen", 15, 1),
    ("BERT's masking chooses 15%", "01_dynamic_masking", "rate_mask", 80, 1),
    ("DistilBERT is 40% smaller", "03_compression", "fewer_pct", 40, 10),
    ("That is 39% fewer", "03_compression", "fewer_pct", 39, 1),
    ("DistilBERT's configuration gives", "03_compression", "n_distil", 66.4e6, 0.1e6),
    ("DistilBERT's configuration gives", "03_compression", "n_bert", 109.5e6, 0.1e6),
    ("In 32-bit floating point", "03_compression", "mib_distil", 253, 1),
    ("In 32-bit floating point", "03_compression", "mib_bert", 418, 1),
    ("With quantisation to eight bits", "03_compression", "mib_distil8", 63, 1),
    ("torch's `quantize_dynamic`", "03_compression", "file_linear", 63, 1),
    ("The combined factor", "03_compression", "factor", 6.6, 0.1),
    ("The combined factor", "03_compression", "file_factor_linear", 6.6, 0.1),
    ("The PyTorch tutorial", "03_compression", "bert_file_mb", 438, 1),
    ("The PyTorch tutorial", "03_compression", "bert_int8_mb", 181, 1),
    ("ALBERT-base has around 12 million", "04_albert", "n_ALBERT_base", 12e6, 1e6),
    ("ALBERT-base has around 12 million", "04_albert", "n_BERT_base", 109.5e6, 0.1e6),
    ("The eighteen-fold reduction", "04_albert", "n_ALBERT_large", 18e6, 1e6),
    ("The eighteen-fold reduction", "04_albert", "n_BERT_large", 335e6, 1e6),
    ("| ALBERT-xlarge |", "04_albert", "n_ALBERT_xlarge", 60e6, 1e6),
    ("| ALBERT-xxlarge |", "04_albert", "n_ALBERT_xxlarge", 235e6, 1e6),
]


@pytest.mark.parametrize("words, doc, key, published, unit", CLAIMS)
def test_claims_page_verdict_matches_the_computed_value(words, doc, key, published, unit):
    rows = [
        line
        for line in (ROOT / "book" / "claims.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("|") and words in line
    ]
    assert len(rows) == 1, f"{len(rows)} rows of book/claims.md contain {words!r}"
    row = rows[0]
    assert re.search(rf"{doc}\.ipynb::{key}:", row), f"the row {words!r} does not glue {doc}::{key}"
    value = float(glue_values(f"book/{doc}")[key])
    verdict = row.rstrip(" |").rsplit(" | ", 1)[-1]
    agrees = abs(value - published) <= unit / 2 * (1 + 1e-9)
    expected = "**agrees**" if agrees else "**differs**"
    assert expected in verdict, f"{key} = {value:g} against {published:g}: the row should say {expected}"


EVIDENCE = {"exact", "measured", "toy scale", "none"}


def _claim_rows():
    rows = []
    for line in (ROOT / "book" / "claims.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and not line.startswith("| claim"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows.append(cells)
    return rows


def test_claims_page_says_how_strong_each_row_is():
    rows = _claim_rows()
    assert len(rows) > 30
    for cells in rows:
        claim, evidence, verdict = cells[0], cells[-2], cells[-1]
        assert evidence in EVIDENCE, f"{claim!r}: evidence {evidence!r} is not one of {sorted(EVIDENCE)}"
        if evidence == "none":
            assert verdict.startswith("**not reproduced**"), f"{claim!r}: no evidence, so not reproduced"
        if evidence == "toy scale":  # a toy model shows a direction, never agreement with a published figure
            assert "**agrees" not in verdict, f"{claim!r}: toy-scale evidence cannot say agrees"
            assert verdict.startswith(("**consistent**", "**not reproduced**", "**differs**")), claim
        if verdict.startswith("**consistent**"):
            assert evidence == "toy scale", f"{claim!r}: consistent is the toy-scale verdict"


@pytest.mark.parametrize("words", sorted({words for words, *_ in CLAIMS}))
def test_rows_checked_against_figures_rest_on_exact_or_measured_evidence(words):
    (cells,) = [c for c in _claim_rows() if words in "| " + " | ".join(c) + " |"]
    assert cells[-2] in {"exact", "measured"}, f"{words!r} compares a figure digit for digit: {cells[-2]!r}"


def _prose(doc: str) -> str:
    """The text a reader reads in a document of the book: a page's Markdown or a notebook's Markdown cells."""
    path = ROOT / f"{doc}.md"
    if path.exists():
        return path.read_text(encoding="utf-8")
    nb = nbformat.read(ROOT / f"{doc}.ipynb", as_version=4)
    return "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")


@pytest.mark.parametrize("doc", [d for d in toc_docs() if (ROOT / f"{d}.ipynb").exists()])
def test_every_glued_value_is_shown_somewhere(doc):
    # a value glued and never shown is a number the page computes for no reader
    name = doc.rsplit("/", 1)[-1]
    own = set(re.findall(r"\{glue(?::\w+)?\}`(\w+)", _prose(doc)))
    elsewhere = {
        key
        for other in toc_docs()
        for key in re.findall(r"\{glue(?::\w+)?\}`" + re.escape(name) + r"\.ipynb::(\w+)", _prose(other))
    }
    unshown = sorted(set(glue_values(doc)) - own - elsewhere)
    assert not unshown, f"{doc} glues values no page shows: {unshown}"
