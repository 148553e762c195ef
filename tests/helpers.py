"""What several test files share, so that no test file imports another: the modules' length limit, the
book's documents and glued values (test_book.py, test_browser.py), the headless Chromium the browser tests drive and the
quiet server of the built site (test_browser.py, test_browser_widgets.py, test_browser_fill.py), and the
sentences for the course model (test_webmodel.py, test_browser_fill.py)."""

import functools
import http.server
from pathlib import Path

import nbformat
import yaml

from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: F401 (one home: the browser tests launch it alike)

ROOT = Path(__file__).resolve().parents[1]
#: The longest a module of lib/, tools/ or benchmarks/ may be (test_one_home.py; test_format.py: a file that
#: formatting would take past it stays unformatted until it is split).
MAX_LINES = 400
#: Sentences for the course model: news of each kind, several blanks, punctuation, unknown words.
SENTENCES = [
    "the chancellor said the [MASK] would grow by 3% next year.",
    "manchester united [MASK] the match 2-1.",
    "the film won the [MASK] for best actor at the oscars.",
    "shares in the [MASK] fell sharply after the profit warning.",
    "the prime minister will [MASK] the election in [MASK].",
    "apple unveiled a new [MASK] that plays music and video.",
    "Chelsea's manager said the [MASK] was \"unacceptable\" - and fined him £20,000.",
    "a zyxwvut [MASK] qwertyuiopasdf happened.",
]


def toc_docs() -> list[str]:
    """Every document of _toc.yml (root first), as 'book/03_compression'."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    docs = [toc["root"]]
    for part in toc.get("parts", []):
        docs += [chapter["file"] for chapter in part.get("chapters", [])]
    return docs


@functools.cache
def glue_values(doc: str) -> dict[str, str]:
    """The text/plain value of every key a notebook glues ('book/03_compression'), from its stored outputs."""
    nb = nbformat.read(ROOT / f"{doc}.ipynb", as_version=4)
    values = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                data = output.get("data", {})
                values[name] = data.get("application/papermill.record/text/plain", data.get("text/plain"))
    return values


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
