"""The book: the times of its builds (cold and rebuild) and the weight of each page it builds."""

from __future__ import annotations

import re
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from benchmarks import ROOT
from benchmarks.commands import timed


def book_build_times(root: Path = ROOT) -> dict:
    """``jupyter-book build`` into an empty temporary folder (cold), then again unchanged (rebuild).

    The cold build also counts the HTML pages it wrote under ``book/``, a check that it built the book.
    """
    jb = Path(sys.executable).with_name("jupyter-book")
    with tempfile.TemporaryDirectory(prefix="bench-book-") as out:
        cmd = [str(jb), "build", str(root), "--path-output", out, "--keep-going"]
        cold = timed(cmd)
        cold["pages"] = len(list((Path(out) / "_build" / "html" / "book").glob("*.html")))
        if cold["returncode"] == 0:
            cold["weights"] = page_weights(Path(out) / "_build" / "html")
        rebuild = timed(cmd)
    return {
        "command": "jupyter-book build . --path-output <empty temporary folder> --keep-going",
        "cold": cold,
        "rebuild": rebuild,
    }


class _PageParser(HTMLParser):
    """What a page makes the browser load as it opens (scripts, stylesheets, preloads, images,
    icons), its inline scripts and styles, and the bytes of the course's browser widgets."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.loads, self.inline, self.widget_depth, self.widget_start = [], 0, 0, []
        self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        rel = (a.get("rel") or "").split()
        if tag == "script" and a.get("src"):
            self.loads.append(a["src"])
        elif tag == "link" and a.get("href") and {"stylesheet", "preload", "icon"} & set(rel):
            self.loads.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.loads.append(a["src"])
        elif tag in ("script", "style"):
            self._in = tag
        if tag == "div" and "bf-widget" in (a.get("class") or "").split():
            self.widget_start.append(self.getpos())

    def handle_data(self, data):
        if self._in:
            self.inline += len(data.encode("utf-8"))

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None


def page_weights(html: Path, pages=None) -> dict:
    """The weight of each page of a built site: the bytes of its HTML and of every file of the site it
    makes the browser load as it opens (scripts, stylesheets, preloads, images and icons, each once),
    whether the file exists, and every address outside the site it names (which an offline reader
    cannot load). ``inline_bytes``: its inline scripts and styles; ``widgets``/``widget_bytes``: the
    course's browser widgets (``bertfamily.widgets``) on it, whole. Not counted: fonts and images that
    stylesheets name, and what scripts fetch later (the search index, a model on first use).

    ``pages`` defaults to every ``.html`` file under ``book/`` and the site's ``index.html``.
    """
    html = Path(html)
    if not (html / "index.html").is_file():
        raise ValueError(f"{html} is not a built site (no index.html): build it with `make book`")
    pages = [Path(p) for p in pages] if pages else [html / "index.html", *sorted((html / "book").glob("*.html"))]
    out = {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        parser = _PageParser()
        parser.feed(text)
        files, external, missing = {}, [], []
        for ref in parser.loads:
            url = urlsplit(ref)
            if url.scheme in ("http", "https") or ref.startswith("//"):
                external.append(ref)
                continue
            if url.scheme == "data":
                continue
            target = (page.parent / unquote(url.path)).resolve()
            if target.is_file():
                files[str(target)] = target.stat().st_size
            else:
                missing.append(ref)
        widgets = [m.start() for m in re.finditer(r'<div class="bf-widget', text)]
        widget_bytes = sum(len(_element(text, start).encode("utf-8")) for start in widgets)
        html_bytes = len(text.encode("utf-8"))
        out[str(page.relative_to(html))] = {
            "html_bytes": html_bytes,
            "loaded_bytes": sum(files.values()),
            "loaded_files": len(files),
            "total_bytes": html_bytes + sum(files.values()),
            "inline_bytes": parser.inline,
            "widgets": len(widgets),
            "widget_bytes": widget_bytes,
            "external": sorted(set(external)),
            "missing": sorted(set(missing)),
        }
    return out


def _element(text: str, start: int) -> str:
    """The ``<div ...>...</div>`` that starts at ``start`` of ``text`` (nested divs counted)."""
    depth, pos = 0, start
    for m in re.compile(r"<div\b|</div>").finditer(text, start):
        depth += 1 if m.group() != "</div>" else -1
        pos = m.end()
        if depth == 0:
            break
    return text[start:pos]


def page_weight_table(weights: dict) -> str:
    """The pages' weights as a markdown table (kB = 1,000 bytes)."""
    rows = [
        "| page | HTML (kB) | files it loads | their kB | total (kB) | widgets (kB) | outside the site |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for page, w in weights.items():
        widgets = f"{w['widgets']}: {w['widget_bytes'] / 1000:.1f}" if w["widgets"] else ""
        rows.append(
            f"| {page} | {w['html_bytes'] / 1000:.1f} | {w['loaded_files']} | {w['loaded_bytes'] / 1000:.1f} "
            f"| {w['total_bytes'] / 1000:.1f} | {widgets} | {len(w['external']) or ''} |"
        )
    return "\n".join(rows)
