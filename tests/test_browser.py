"""The website as a reader sees it: every page of _toc.yml opened in headless Chromium.

The book is built once per session (the `book_build` fixture of tests/conftest.py, shared with the
strict build test) and served on localhost. Each page must load without failed requests for local
files, show its figures, its launch buttons (Binder and Colab, for that very notebook, and Thebe)
and every number it glues, with no broken internal link; a solution dropdown must open on click,
and the search page must find a term. With BOOK_SCREENSHOTS set to a folder (e.g.
`BOOK_SCREENSHOTS=_build/screenshots make test`), a screenshot of every page is written there and the
folder is named in the summary at the end of the run; without it none is (a full-page screenshot costs
Chromium about 1.7 s of CPU a lesson, and no check reads it).

The checks are plain functions that return a list of problems. `test_checks_detect_removals` runs
them on copies of a built page with a figure, a glued number or a launch button removed, and
asserts that each removal is reported: a check that cannot fail is not a check.

Requests that leave localhost (the widget manager and Thebe from their CDNs) are blocked, as they
would fail anyway on an offline machine; so widgets show as their saved-state placeholders. MathJax
is served with the site (`_static/mathjax/`, from the pinned `sphinx-mathjax-offline`), so every
formula must be typeset: none left as TeX source, none a TeX error.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
import yaml
from helpers import CHROMIUM, CHROMIUM_ARGS, _QuietHandler, glue_values, toc_docs

ROOT = Path(__file__).resolve().parents[1]
GLUE_TEXT = re.compile(r"\{glue:text\}`([^`]+)`")
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
pytestmark = pytest.mark.book


# ---------------------------------------------------------------- what each page should show


def _notebook(doc: str) -> Path:
    return ROOT / f"{doc}.ipynb"


def _markdown(doc: str) -> str:
    if _notebook(doc).is_file():
        nb = nbformat.read(_notebook(doc), as_version=4)
        return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return (ROOT / f"{doc}.md").read_text(encoding="utf-8")


def expected_glue_texts(doc: str) -> list[str]:
    """Every `{glue:text}` of a page, formatted as myst-nb formats it (keys from other notebooks too)."""
    from myst_nb.core.variables import format_plain_text

    texts = []
    for role in GLUE_TEXT.findall(_markdown(doc)):
        key_fmt = role.rsplit(":", 1)  # the parsing of myst-nb's PasteTextRole
        key, fmt = key_fmt if len(key_fmt) == 2 else (key_fmt[0], "s")
        source = doc
        if "::" in key:
            path, key = key.split("::", 1)
            source = str((Path(doc).parent / path).with_suffix("")).replace(os.sep, "/")
        value = glue_values(source).get(key)
        assert value is not None, f"{doc} glues {key!r}, which {source} does not store"
        texts.append(format_plain_text(value, fmt))
    return texts


def expected_figures(doc: str) -> int:
    """How many image outputs a notebook stores (widget views, which the site renders, excluded)."""
    if not _notebook(doc).is_file():
        return 0
    nb = nbformat.read(_notebook(doc), as_version=4)
    count = 0
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type != "code" or tags & {"remove-output", "remove-cell"}:
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if any(m in data for m in IMAGE_MIMES) and "application/vnd.jupyter.widget-view+json" not in data:
                count += 1
    return count


@functools.cache
def launch_targets(doc: str) -> dict[str, str]:
    """The Binder and Colab addresses that the launch buttons of a notebook page must point to."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    repo = config["repository"]["url"].rstrip("/").removeprefix("https://github.com/")
    branch = config["repository"].get("branch", "main")
    launch = config["launch_buttons"]
    folder = config["repository"].get("path_to_book", "").strip("/")
    path = f"{folder}/{doc}.ipynb" if folder else f"{doc}.ipynb"
    return {
        "Binder": f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{repo}/{branch}?urlpath=tree/{path}",
        "Colab": f"{launch['colab_url'].rstrip('/')}/github/{repo}/blob/{branch}/{path}",
    }


# ---------------------------------------------------------------- the checks (lists of problems)


def open_page(context, url: str):
    """Open `url`; return the page and the failed requests for local files seen while it loaded."""
    page = context.new_page()
    failures = []
    local = f"{urlsplit(url).scheme}://{urlsplit(url).netloc}/"
    page.on("requestfailed", lambda r: r.url.startswith(local) and failures.append(f"{r.url}: {r.failure}"))
    page.on(
        "response",
        lambda r: r.url.startswith(local) and r.status >= 400 and failures.append(f"{r.url}: HTTP {r.status}"),
    )
    page.on(
        "console",
        lambda m: (
            m.type == "error"
            and m.location.get("url", "").startswith(local)
            and "Failed to load resource" in m.text
            and failures.append(f"console: {m.text}")
        ),
    )
    page.goto(url, wait_until="load")
    return page, failures


def figure_problems(page, expected: int) -> list[str]:
    """Every figure of the page is an image that loaded with a non-zero size, and none is missing."""
    images = page.eval_on_selector_all(
        "main img[src*='_images/']", "els => els.map(e => [e.getAttribute('src'), e.naturalWidth, e.naturalHeight])"
    )
    problems = [f"figure {src} did not load ({w}x{h})" for src, w, h in images if not (w and h)]
    if len(images) != expected:
        problems.append(f"{len(images)} figures on the page, the notebook stores {expected}")
    return problems


TYPESET_QUOTES = str.maketrans("‘’“”", "''\"\"")


def glue_problems(page, expected: list[str]) -> list[str]:
    """Every glued number is on the page as text, and no glue role was left unrendered. A glued sentence's
    quotes are typeset as the rest of the page's (Sphinx's smart quotes: ' becomes ’): the same text."""
    shown = page.eval_on_selector_all("span.pasted-text", "els => els.map(e => e.textContent)")
    shown = [text.translate(TYPESET_QUOTES) for text in shown]
    problems = []
    missing = Counter(expected) - Counter(shown)
    if missing:
        problems.append(f"glued values missing from the page: {dict(missing)}")
    extra = Counter(shown) - Counter(expected)
    if extra:
        problems.append(f"glued values the source does not have: {dict(extra)}")
    if "{glue" in page.inner_text("main"):
        problems.append("an unrendered {glue...} role is on the page")
    return problems


#: Text nodes of the page outside code, the typeset formulas and scripts, holding a TeX delimiter.
_RAW_TEX = r"""() => {
    const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
    const found = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (node.parentElement.closest('pre, code, script, style, mjx-container')) continue;
        if (/\\\(|\\\[|\$\$/.test(node.textContent)) found.push(node.textContent.trim().slice(0, 60));
    }
    return found;
}"""


def formula_problems(page, base: str, timeout_ms: int = 10000) -> list[str]:
    """Every formula on the page was typeset by MathJax, and MathJax came from the site itself.

    Sphinx writes each formula as TeX inside an element of class ``math``; MathJax replaces that
    TeX by an ``mjx-container``. A page without formulas has nothing to check."""
    count = page.eval_on_selector_all("main .math", "els => els.length")
    raw = page.evaluate(_RAW_TEX)
    if not count and not raw:
        return []
    problems = []
    sources = page.eval_on_selector_all("script[src*='mathjax']", "els => els.map(e => e.src)")
    if not any(src.startswith(base) for src in sources):
        problems.append(f"MathJax is not served with the site (scripts: {sources})")
    try:
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=timeout_ms)
        page.evaluate("() => MathJax.startup.promise.then(() => true)")
    except Exception:  # playwright's TimeoutError
        return problems + [f"MathJax did not start: {count} formulas left as TeX"]
    untypeset = page.eval_on_selector_all(
        "main .math", "els => els.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent)"
    )
    if untypeset:
        problems.append(f"{len(untypeset)} of {count} formulas not typeset, e.g. {untypeset[0][:60]!r}")
    errors = page.eval_on_selector_all("main mjx-merror", "els => els.map(e => e.getAttribute('data-mjx-error'))")
    if errors:
        problems.append(f"TeX errors in formulas: {errors[:3]}")
    raw = page.evaluate(_RAW_TEX)
    if raw:
        problems.append(f"TeX left as text on the page: {raw[:3]}")
    return problems


def folded_cells(doc: str) -> int:
    """How many code cells of the page's notebook are tagged ``hide-input`` (machinery: plots, glue)."""
    path = _notebook(doc)
    if not path.is_file():
        return 0
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return sum("hide-input" in c.get("metadata", {}).get("tags", []) for c in cells if c["cell_type"] == "code")


def code_width_problems(page) -> list[str]:
    """At the screenshots' 1280 pixels, a visible code cell's lines (formatted to 88 columns) fit the
    book's column without wrapping, and no code, output or table scrolls sideways."""
    wrapped = page.eval_on_selector_all(
        "main .cell_input pre",
        "els => els.filter(e => e.offsetParent !== null).filter(e => {"
        " const was = e.style.whiteSpace; e.style.whiteSpace = 'pre';"
        " const over = e.scrollWidth > e.clientWidth + 1; e.style.whiteSpace = was; return over; })"
        ".map(e => e.textContent.split('\\n').reduce((a, b) => a.length >= b.length ? a : b))",
    )
    wide = page.eval_on_selector_all(
        "main pre, main table",
        "els => els.filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)"
        ".map(e => e.textContent.split('\\n').reduce((a, b) => a.length >= b.length ? a : b))",
    )
    problems = []
    if wrapped:
        problems.append(
            f"{len(wrapped)} code cells wrap at the column; the longest line of the first: {wrapped[0].strip()[:70]!r}"
        )
    if wide:
        problems.append(f"{len(wide)} blocks scroll sideways; the longest line of the first: {wide[0].strip()[:70]!r}")
    return problems


def folded_problems(page, expected: int) -> list[str]:
    """Each ``hide-input`` cell shows its output with its source folded behind a closed toggle."""
    states = page.eval_on_selector_all(
        "main .cell.tag_hide-input",
        "els => els.map(e => { const d = e.querySelector('details.above-input');"
        " return d ? (d.open ? 'open' : 'folded') : 'not folded'; })",
    )
    problems = []
    if len(states) != expected:
        problems.append(f"{len(states)} cells tagged hide-input on the page, the notebook has {expected}")
    if any(state != "folded" for state in states):
        problems.append(f"hide-input cells not folded: {states}")
    return problems


def launch_problems(page, targets: dict[str, str]) -> list[str]:
    """The launch menu opens on click and lists Binder and Colab for this notebook, and Thebe."""
    menu = page.locator(".dropdown-launch-buttons")
    if menu.count() == 0:
        return ["no launch-button menu"]
    menu.locator("button").first.click()
    problems = []
    for name, href in targets.items():
        link = page.locator(f'.dropdown-launch-buttons a[href="{href}"]')
        if link.count() == 0:
            found = page.eval_on_selector_all(".dropdown-launch-buttons a", "els => els.map(e => e.href)")
            problems.append(f"no {name} button pointing to {href} (found {found})")
        elif not link.first.is_visible():
            problems.append(f"the {name} button does not show when the menu is opened")
    if page.locator(".dropdown-launch-buttons .btn-launch-thebe").count() == 0:
        problems.append("no Thebe (live code) button")
    page.keyboard.press("Escape")
    return problems


def link_problems(page, html: Path) -> list[str]:
    """Every link to a page of the site reaches a file, and its #anchor an element of that page."""
    here = urlsplit(page.url)
    problems = []
    for href in set(page.eval_on_selector_all("main a[href]", "els => els.map(e => e.href)")):
        url = urlsplit(href)
        if url.netloc != here.netloc:
            continue
        target = html / unquote(url.path).lstrip("/")
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            problems.append(f"link to a missing file: {href}")
        elif url.fragment and f'id="{url.fragment}"' not in target.read_text(encoding="utf-8"):
            problems.append(f"link to a missing anchor: {href}")
    return problems


def widget_problems(page) -> list[str]:
    """Every widget view on the page has its saved state embedded (the site has no kernel)."""
    parse = "els => els.map(e => JSON.parse(e.textContent))"
    views = page.eval_on_selector_all('script[type="application/vnd.jupyter.widget-view+json"]', parse)
    states = page.eval_on_selector_all('script[type="application/vnd.jupyter.widget-state+json"]', parse)
    saved = {model for state in states for model in state.get("state", {})}
    return [f"widget {v['model_id']} has no saved state" for v in views if v["model_id"] not in saved]


def solution_problems(page) -> list[str]:
    """The first solution is hidden until its title is clicked, and shown after."""
    solution = page.locator(".solution.dropdown").first
    if solution.count() == 0:
        return ["no solution dropdown on the page"]
    body = solution.locator(":scope > :not(.admonition-title)").first
    if body.is_visible():
        return ["the solution shows before it is clicked"]
    button = solution.locator("button.toggle-button")  # not the title, whose link would navigate
    (button if button.count() else solution.locator(".admonition-title")).first.click()
    try:
        body.wait_for(state="visible", timeout=5000)
    except Exception:  # playwright's TimeoutError
        return ["the solution does not show after a click on its title"]
    return []


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def site(book_build):
    """The built website served on a free localhost port: (folder, base address)."""
    if book_build.returncode != 0 or not (book_build.html / "index.html").is_file():
        pytest.fail("the website did not build (see test_book_builds_strictly):\n" + book_build.log[-2000:])
    handler = functools.partial(_QuietHandler, directory=str(book_build.html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield book_build.html, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser_context(site, book_report, playwright_driver):
    """One headless Chromium for the session; requests that leave localhost are blocked."""
    if not CHROMIUM.is_file():
        reason = f"browser tests skipped: no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)"
        book_report["browser"] = reason
        pytest.skip(reason)
    base = site[1]
    start = time.perf_counter()
    browser = playwright_driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15000)
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base) else route.abort())
    yield context
    browser.close()
    book_report["browser time"] = f"browser tests: {time.perf_counter() - start:.1f} s in Chromium"


@pytest.fixture(scope="session")
def screenshots(book_report) -> Path | None:
    """The folder the page screenshots go to (BOOK_SCREENSHOTS), or None: no screenshots."""
    if not os.environ.get("BOOK_SCREENSHOTS"):
        book_report["screenshots"] = "no screenshots (BOOK_SCREENSHOTS=_build/screenshots make test writes them)"
        return None
    folder = Path(os.environ["BOOK_SCREENSHOTS"])
    folder.mkdir(parents=True, exist_ok=True)
    book_report["screenshots"] = f"screenshots of every page: {folder}"
    return folder


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("doc", toc_docs())
def test_page_as_a_reader_sees_it(doc, site, browser_context, screenshots):
    html, base = site
    page, failures = open_page(browser_context, base + f"{doc}.html")
    try:
        if screenshots is not None:
            shot = screenshots / f"{doc.replace('/', '_')}.jpg"
            page.screenshot(path=str(shot), full_page=True, type="jpeg", quality=80)
            print(f"screenshot: {shot}")
        problems = [f"failed local request {f}" for f in failures]
        problems += figure_problems(page, expected_figures(doc))
        problems += glue_problems(page, expected_glue_texts(doc))
        problems += link_problems(page, html)
        problems += widget_problems(page)
        problems += formula_problems(page, base)
        problems += folded_problems(page, folded_cells(doc))
        if doc != "book/exercise_distilbert":  # its cells keep the layout students hand in (tools/nb.py)
            problems += code_width_problems(page)
        if _notebook(doc).is_file():
            problems += launch_problems(page, launch_targets(doc))
        assert not problems, f"{doc}:\n" + "\n".join(problems)
    finally:
        page.close()


def test_solution_opens_on_click(site, browser_context):
    page, failures = open_page(browser_context, site[1] + "book/exercise_distilbert.html")
    try:
        assert solution_problems(page) == []
    finally:
        page.close()


def test_search_finds_a_term(site, browser_context):
    page, failures = open_page(browser_context, site[1] + "search.html?q=distillation")
    try:
        page.wait_for_selector("#search-results ul.search li", timeout=15000)
        found = page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.href)")
        assert any("book/02_distillation.html" in href for href in found), found
    finally:
        page.close()


BROKEN = {  # what is removed from a copy of a built lesson page, and which check must notice it
    "figure_missing_file": (r'src="\.\./_images/[^"]+"', 'src="../_images/no-such-figure.png"', "figures"),
    "figure_removed": (r'<img[^>]*src="\.\./_images/[^"]+"[^>]*>', "", "figures"),
    "glued_number_removed": (r'<span class="pasted-text">[^<]*</span>', "", "glue"),
    "binder_button_removed": (r'<li><a href="https://mybinder\.org[^"]*".*?</li>', "", "launch"),
    "colab_points_elsewhere": (
        r'(colab\.research\.google\.com/[^"]*/)04_albert\.ipynb',
        r"\g<1>00_setup.ipynb",
        "launch",
    ),
    "mathjax_removed": (r'<script defer="defer" src="\.\./_static/mathjax/tex-chtml\.js"></script>', "", "formulas"),
    "formula_not_marked": (
        r'<span class="math notranslate nohighlight">',
        '<span class="notranslate nohighlight">',
        "formulas",
    ),
    "formula_unbalanced": (r'(<span class="math notranslate nohighlight">\\\()', r"\g<1>{", "formulas"),
    # without the stylesheet that sets code at the column's size, 88-column lines wrap
    "code_wrap_removed": (
        r'<link rel="stylesheet" type="text/css" href="\.\./_static/code-width\.css[^"]*" />',
        "",
        "width",
    ),
    "fold_opened": (
        r'<details class="admonition hide above-input([^"]*)">',
        r'<details class="admonition hide '
        r'above-input\g<1>" open>',
        "folded",
    ),
}


def test_checks_detect_removals(site, browser_context):
    """The page checks fail on copies of a built page with one thing removed.

    The unchanged page passes the same checks in test_page_as_a_reader_sees_it; here every other
    check must still pass on each copy, so that each removal is told apart from the others.
    """
    html, base = site
    doc = "book/04_albert"  # a page with every kind of content the checks look at, and a short one
    original = (html / f"{doc}.html").read_text(encoding="utf-8")
    checks = {
        "figures": lambda page: figure_problems(page, expected_figures(doc)),
        "glue": lambda page: glue_problems(page, expected_glue_texts(doc)),
        "launch": lambda page: launch_problems(page, launch_targets(doc)),
        "formulas": lambda page: formula_problems(page, base, timeout_ms=3000),
        "width": code_width_problems,
        "folded": lambda page: folded_problems(page, folded_cells(doc)),
    }
    for name, (pattern, replacement, check) in BROKEN.items():
        text, n = re.subn(pattern, replacement, original, count=1, flags=re.DOTALL)
        assert n == 1, f"{name}: the pattern no longer matches the built page"
        copy = html / "book" / f"_test_{name}.html"
        copy.write_text(text, encoding="utf-8")
        page, failures = open_page(browser_context, base + f"book/{copy.name}")
        try:
            found = {c: run(page) for c, run in checks.items()}
            found["figures"] += failures
        finally:
            page.close()
            copy.unlink()
        assert found[check], f"{name}: the {check} check did not notice"
        assert not any(v for c, v in found.items() if c != check), f"{name}: other checks fired: {found}"


def test_expected_glue_texts_formats_as_myst_nb():
    """The expectation itself: cross-document keys are read from the other notebook and formatted."""
    texts = expected_glue_texts("book/claims")
    n_bert = int(glue_values("book/03_compression")["n_bert"])
    assert f"{n_bert:,d}" in texts
    assert len(texts) == len(GLUE_TEXT.findall(_markdown("book/claims")))


#: The lessons' browser widgets (bertfamily.widgets): the page, and the check of tests/widget_checks.py.
BROWSER_WIDGETS = {
    "book/02_distillation": "temperature",
    "book/03_compression": "sizes",
    "book/01_dynamic_masking": "remask",
}


def allowed_at_load(doc: str) -> set[str]:
    """The addresses outside the site that a lesson's page may name as it opens: myst-nb's ipywidgets
    manager (require.js and the HTML manager, from CDNs) where the notebook stores widget state (its
    progress bars, an ipywidget), blocked here as offline; nothing else."""
    from myst_nb.core.config import ipywidgets_js_factory

    metadata = nbformat.read(_notebook(doc), as_version=4).metadata
    if metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json"):
        return set(ipywidgets_js_factory())
    return set()


@pytest.mark.parametrize("doc", list(BROWSER_WIDGETS))
def test_widgets_compute_in_the_browser(doc, site, browser_context):
    """On the built page, offline, each lesson's widget responds to its controls (mouse and keyboard)
    with the numbers the course's Python computes for the same settings (tests/widget_checks.py), and
    asks nothing of any other site while it is used; nor does the page as it opens, unless the lesson
    stores ipywidgets' state (whose manager myst-nb loads from a CDN, blocked here: see allowed_at_load)."""
    import widget_checks as checks

    name = BROWSER_WIDGETS[doc]
    requests, errors = [], []
    page = browser_context.new_page()
    page.on("request", lambda r: not r.url.startswith(site[1]) and requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(site[1] + f"{doc}.html", wait_until="networkidle")  # what it loads after "load" too
        at_load, errors_at_load = list(requests), len(errors)  # the theme's own (Thebe's) are not the widget's
        roots = page.locator(checks.SELECTORS[name])
        assert roots.count() == 1, f"{doc}: {roots.count()} {name} widgets on the page"
        root = roots.first
        root.scroll_into_view_if_needed()
        if name == "temperature":
            problems = checks.temperature_problems(root)
        elif name == "sizes":
            problems = checks.size_problems(root)
        else:
            from bertfamily.models import minilm_tokenizer

            problems = checks.remask_problems(root, minilm_tokenizer())
        problems += [f"script error while the widget was used: {e}" for e in errors[errors_at_load:]]
        problems += [f"a request left the site while the widget was used: {r}" for r in requests[len(at_load) :]]
        problems += [
            f"a request left the site as the page opened: {r}" for r in at_load if r not in allowed_at_load(doc)
        ]
        assert not problems, f"{doc}:\n" + "\n".join(problems[:20])
    finally:
        page.close()


def test_every_widget_has_a_static_figure_beside_it():
    """An `interact` cell shows nothing on the website, and a browser widget (bertfamily.widgets)
    nothing that moves without JavaScript, so one of the next two code cells draws a figure."""
    lonely = []
    for doc in toc_docs():
        if not _notebook(doc).is_file():
            continue
        cells = [c for c in nbformat.read(_notebook(doc), as_version=4).cells if c.cell_type == "code"]
        for i, cell in enumerate(cells):
            mimes = {m for o in cell.get("outputs", []) for m in o.get("data", {})}
            html = "".join(str(o.get("data", {}).get("text/html", "")) for o in cell.get("outputs", []))
            if (
                "interact" in cell.source
                and "application/vnd.jupyter.widget-view+json" in mimes
                or 'class="bf-widget' in html
            ):
                after = [m for c in cells[i + 1 : i + 3] for o in c.get("outputs", []) for m in o.get("data", {})]
                if not any(m in IMAGE_MIMES for m in after):
                    lonely.append(f"{doc}: code cell {i}")
    assert not lonely, f"widgets without a static figure after them: {lonely}"


# ---------------------------------------------------------------- make lab


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Lab:
    """`make lab` started in the background (its own process group), and its JupyterLab once it answers."""

    def __init__(self, tmp_path, make_args, cwd=ROOT):
        import subprocess
        import urllib.request

        self.port, self.token = _free_port(), os.urandom(12).hex()
        # no --allow-root here: as root (CI, this workplace's machines) `make lab` adds it itself
        args = f"--no-browser --port={self.port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={self.token}"
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),  # no user settings, no news
            "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
            "JUPYTER_RUNTIME_DIR": str(tmp_path / "run"),
        }
        self.log_path = tmp_path / "lab.log"
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            ["make", "-s", "-o", ".venv/.installed", "lab", *make_args, f"LAB_ARGS={args}"],
            cwd=cwd,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 300  # a loaded machine: make student, then JupyterLab's start
        while True:  # the server answers once it is up
            try:
                with urllib.request.urlopen(f"{self.base}/api/status?token={self.token}", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("make lab did not answer in 300 s:\n" + self.log_path.read_text()[-3000:])
            time.sleep(1)

    def page(self, browser_context):
        """A page of the session's Chromium (one Playwright per thread), in a context of its own."""
        page = browser_context.browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(120_000)
        page.route(
            "**/*", lambda route: route.continue_() if route.request.url.startswith(self.base) else route.abort()
        )
        return page

    def stop(self):
        import signal
        import subprocess

        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # make and the JupyterLab it started (its own group)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


def _needs_lab():
    if not CHROMIUM.is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)")
    if not (ROOT / ".venv" / "bin" / "jupyter-lab").is_file():
        pytest.skip("JupyterLab is not installed in .venv: `make lab` (or pip install -e '.[lab]') installs it")


def test_make_lab_opens_a_lesson_and_runs_a_cell(tmp_path, browser_context):
    """`make lab` starts JupyterLab in the course's .venv (as root too: it adds --allow-root, and says
    so); a lesson opens, and its first code cell (the Colab cell: it imports the course package and
    prints the versions) runs in the kernel.

    The lesson is a copy in a temporary folder (LAB_DIR), so that JupyterLab's autosave cannot touch
    book/. `-o .venv/.installed` keeps make from reinstalling the environment first."""
    _needs_lab()
    lesson = "05_multilingual.ipynb"
    copy = nbformat.read(ROOT / "book" / lesson, as_version=4)
    for cell in copy.cells:  # without its stored outputs, an output on the page is one the kernel made
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(copy, tmp_path / lesson)
    lab = _Lab(tmp_path, [f"LAB_DIR={tmp_path}"])
    try:
        said = lab.log_path.read_text()
        assert ("--allow-root" in said) == (os.geteuid() == 0), said
        page = lab.page(browser_context)
        page.goto(f"{lab.base}/lab/tree/{lesson}?token={lab.token}")
        title = page.locator(".jp-Notebook .jp-MarkdownCell h1").first
        try:
            title.wait_for()
            assert "One vocabulary for every language" in title.inner_text()
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        finally:
            page.screenshot(path=str(tmp_path / "lab.png"))
        cell = page.locator(".jp-Notebook .jp-CodeCell").first
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        output = cell.locator(".jp-OutputArea-output").filter(has_text="bertfamily:")
        output.first.wait_for()
        text = cell.locator(".jp-OutputArea").inner_text()
        assert "torch: 2.13.0" in text and "seed: 0" in text, text
        assert "[1]" in cell.locator(".jp-InputPrompt").inner_text(), "the cell ran once, in this kernel"
        page.context.close()
    finally:
        lab.stop()


def test_make_lab_student_opens_the_student_version(tmp_path, browser_context):
    """`make lab STUDENT=1` writes the student version (make student) and opens student/: the exercise
    with its placeholders, not the answer key. Run in a folder of links to the checkout (its Makefile,
    .venv and book/), so that the student/ it writes is the test's own."""
    _needs_lab()
    work = tmp_path / "checkout"
    work.mkdir()
    for name in ("Makefile", ".venv", "book", "pyproject.toml", "lib", "tools", "tests"):
        (work / name).symlink_to(ROOT / name)
    lab = _Lab(tmp_path, ["STUDENT=1"], cwd=work)
    try:
        written = work / "student" / "exercise_distilbert.ipynb"
        assert written.is_file(), lab.log_path.read_text()
        page = lab.page(browser_context)
        page.goto(f"{lab.base}/lab/tree/exercise_distilbert.ipynb?token={lab.token}")
        title = page.locator(".jp-Notebook .jp-MarkdownCell h1").first
        title.wait_for()
        assert "Exercise: DistilBERT" in title.inner_text()
        page.context.close()
        # what JupyterLab opened (its cells are drawn as they scroll into view, so asked of its server)
        import urllib.request

        with urllib.request.urlopen(
            f"{lab.base}/api/contents/exercise_distilbert.ipynb?token={lab.token}", timeout=30
        ) as answer:
            cells = json.loads(answer.read())["content"]["cells"]
        code = "\n".join(c["source"] for c in cells)
        assert "# YOUR CODE HERE" in code and 'load("distilbert-base-uncased")' not in code
    finally:
        lab.stop()
    before = written.read_bytes()  # a second start keeps what the student wrote
    written.write_bytes(before.replace(b"# YOUR CODE HERE", b"# MY WORK", 1))
    lab = _Lab(tmp_path, ["STUDENT=1"], cwd=work)
    try:
        assert b"# MY WORK" in written.read_bytes() and "opening student/ as it is" in lab.log_path.read_text()
    finally:
        lab.stop()


def run_first_cell(page):
    """In the notebook open in JupyterLab, wait for its kernel, run its first code cell; return the cell."""
    page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-editor").first.wait_for()
    accept = page.locator(".jp-Dialog .jp-mod-accept")  # "Select Kernel" for a notebook it has not seen run
    try:
        accept.wait_for(timeout=5000)
        accept.click()
    except Exception:  # playwright's TimeoutError: no dialog
        pass
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    cell = page.locator(".jp-Notebook .jp-CodeCell").first
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    return cell


def test_browser_widgets_work_in_jupyterlab(tmp_path, browser_context):
    """The lessons' browser widgets, made by a cell run in JupyterLab's kernel (so the output is
    trusted and its script runs), respond there with the package's numbers (tests/widget_checks.py),
    to the mouse and to the keyboard: JupyterLab's notebook takes the arrow keys in command mode
    unless the widget keeps its key presses to itself (it does: without that, measured here, the
    slider did not move)."""
    import widget_checks as checks

    from bertfamily.models import minilm_tokenizer

    cell = nbformat.v4.new_code_cell(
        "from bertfamily.models import minilm_tokenizer\n"
        "from bertfamily.widgets import remasking, size_calculator, temperature\n"
        "from IPython.display import display\n"
        "tok = minilm_tokenizer()\n"
        "ids = tok('england beat fiji 26-21 in hong kong.', return_tensors='pt')['input_ids']\n"
        "display(temperature([5.0, 2.0, 0.5, 0.5, -0.4], ['cat', 'dog', 'fox', 'cow', 'house']))\n"
        "display(size_calculator())\n"
        "display(remasking(ids, tok))"
    )
    kernel = nbformat.read(ROOT / "book" / "05_multilingual.ipynb", as_version=4).metadata  # its kernel
    nbformat.write(
        nbformat.v4.new_notebook(cells=[cell], metadata={k: kernel[k] for k in ("kernelspec", "language_info")}),
        tmp_path / "widgets.ipynb",
    )
    _needs_lab()
    lab = _Lab(tmp_path, [f"LAB_DIR={tmp_path}"])
    try:
        page = lab.page(browser_context)
        page.goto(f"{lab.base}/lab/tree/widgets.ipynb?token={lab.token}")
        cell = run_first_cell(page)
        try:
            cell.locator(".bf-remask").wait_for(state="attached")
            assert cell.locator(".bf-widget[data-ready='1']").count() == 3, (
                "a widget's script did not run in JupyterLab: " + cell.locator(".jp-OutputArea").inner_html()[:2000]
            )
            problems = checks.temperature_problems(cell.locator(".bf-temperature"), values=[0.5, 3.0, 10.0])
            problems += checks.size_problems(cell.locator(".bf-sizes"), settings=checks.size_combinations(5))
            problems += checks.remask_problems(
                cell.locator(".bf-remask"), minilm_tokenizer(), probabilities=(0.3,), clicks=3, many=0
            )
        finally:
            page.screenshot(path=str(tmp_path / "lab-widgets.png"))
            page.context.close()
        assert not problems, "\n".join(problems[:20])
    finally:
        lab.stop()
