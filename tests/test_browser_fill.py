"""Lesson 1's own-sentence box on the built website: the course model fills blanks in Chromium.

On the page built by the session's strict build (or, with BOOK_HTML=_build/html, a site built before by
`make book`), served on localhost, offline:
the form is there, labelled and usable with the keyboard; nothing of the model loads until the reader
asks; a typed sentence gets the Python model's five guesses (pieces equal, probabilities within 1e-5);
the page says how big the download is, and it is that big; no request leaves the site; with JavaScript
off the page shows what it was built with; the other pages do not load the script. The timings of
benchmarks.browser's ``measure_fill`` are printed (not asserted: the machine is shared).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from helpers import CHROMIUM, CHROMIUM_ARGS, SENTENCES, _QuietHandler

from benchmarks.browser import measure_fill
from bertfamily import fill, webmodel

ROOT = Path(__file__).resolve().parents[1]

LESSON = "book/01_dynamic_masking.html"
#: What a page of the site still asks of CDNs when it loads, none of it the box's: myst-nb's widget manager
#: (require.js, @jupyter-widgets/html-manager) until the site serves its own copies (issue 48, item 1).
#: Blocked here as everywhere; the box itself must ask nothing outside the site.
WIDGET_MANAGER = ("/require.js/", "/require.min.js", "@jupyter-widgets/html-manager")


def left_problems(left: list, loaded: int) -> list:
    """Requests that left the site: any after the page loaded (the reader's, the box's), and any at load
    other than the widget manager's."""
    return [f"left the site after the page loaded: {url}" for url in left[loaded:]] + [
        f"left the site at load: {url}" for url in left[:loaded] if not any(w in url for w in WIDGET_MANAGER)
    ]


pytestmark = pytest.mark.book


@pytest.fixture(scope="module")
def site(request):
    """(folder, base address) of the website served on a free localhost port: BOOK_HTML's, or the
    session's strict build (tests/conftest.py's book_build)."""
    import functools
    import http.server
    import os
    import threading

    if os.environ.get("BOOK_HTML"):
        html = Path(os.environ["BOOK_HTML"]).resolve()
    else:
        build = request.getfixturevalue("book_build")
        if build.returncode != 0:
            pytest.fail("the website did not build (see test_book_builds_strictly):\n" + build.log[-2000:])
        html = build.html
    if not (html / LESSON).is_file():
        pytest.fail(f"no {LESSON} in {html}")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(html)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield html, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def chromium(site, playwright_driver):
    """(new_page, requests that left the site): pages of one headless Chromium, every request outside the
    site blocked and recorded."""
    if not CHROMIUM.is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)")
    base, left = site[1], []

    def route(r):
        if r.request.url.startswith(base) or r.request.url.startswith("data:"):
            return r.continue_()
        left.append(r.request.url)
        return r.abort()

    browser = playwright_driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    contexts = []

    def new_page(javascript: bool = True):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=javascript)
        context.set_default_timeout(60000)
        context.route("**/*", route)
        contexts.append(context)
        page = context.new_page()
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        return page, requests

    yield new_page, left
    for context in contexts:
        context.close()
    browser.close()


@pytest.fixture(scope="module")
def course():
    from bertfamily.checkpoints.course import course_data, load_course_model

    data = course_data()
    return data, load_course_model(data)


def test_a_typed_sentence_gets_the_python_models_five_guesses(site, chromium, course, book_report):
    html, base = site
    new_page, left = chromium
    page, requests = new_page()
    page.goto(base + LESSON, wait_until="load")
    loaded = len(left)
    form = page.locator("form.bf-fill")
    assert form.count() == 1, "no own-sentence form on lesson 1's page"
    assert not any("/course-model/" in url for url in requests), "the model loaded before the reader asked"
    # the widget that needs a kernel is hidden; the form is labelled and starts with the notebook's sentence
    assert page.locator(".cell.tag_browser-fill .cell_output").evaluate_all("els => els.every(e => e.hidden)")
    assert page.evaluate("() => document.querySelector('#bf-fill-input').labels.length") == 1
    assert page.input_value("#bf-fill-input") == "manchester united [MASK] the match 2-1."
    # what runs where, and how big the download is: the page's glued number, the form's note, the files
    files = html / "_static" / webmodel.SITE_FOLDER
    mib = f"{webmodel.download_bytes(files) / 2**20:.1f} MiB"
    assert mib in page.locator(".bf-fill-note").inner_text()
    assert re.search(rf"{re.escape(mib)}, once", page.inner_text("main")), "the prose's download size is not the files'"
    # keyboard: the input takes focus, Tab reaches the button
    page.focus("#bf-fill-input")
    page.keyboard.press("Tab")
    assert (
        page.evaluate("() => document.activeElement.closest('form.bf-fill') !== null && document.activeElement.tagName")
        == "BUTTON"
    )

    result = measure_fill(page, SENTENCES)
    data, model = course
    assert result["errors"] == []
    assert result["download_bytes"] == webmodel.download_bytes(files)
    for text, shown in zip(SENTENCES, result["guesses"], strict=True):
        expected = fill.guess(model, text, data.words, data.tokenizer)
        assert [[p for p, _ in g] for g in shown] == [[p for p, _ in g] for g in expected], text
        for got, want in zip(shown, expected, strict=True):
            assert [q for _, q in got] == pytest.approx([q for _, q in want], abs=1e-5), text
    # what the reader reads: Python's line for the last sentence, as lesson 1 prints it (rounded percentages)
    lines = page.locator(".bf-fill-guesses").all_inner_texts()
    assert len(lines) == SENTENCES[-1].count("[MASK]")
    assert not left_problems(left, loaded)
    book_report["browser fill"] = (
        f"course model in Chromium: first guess {result['first_guess_s']:.2f} s after the first request "
        f"({result['download_bytes']:,} bytes), then {result['median_guess_s']:.2f} s a guess (median)"
    )


def test_the_box_says_what_is_wrong(site, chromium):
    new_page, left = chromium
    page, _ = new_page()
    page.goto(site[1] + LESSON, wait_until="load")
    loaded = len(left)
    page.fill("#bf-fill-input", "no blank here")
    page.press("#bf-fill-input", "Enter")
    page.wait_for_function("() => window.bertfamilyFill.timings.guesses.length >= 1")
    assert "at least one [MASK]" in page.locator(".bf-fill-output").inner_text()
    assert not left_problems(left, loaded)


def test_without_javascript_the_page_stays_as_built(site, chromium):
    new_page, _ = chromium
    page, requests = new_page(javascript=False)
    page.goto(site[1] + LESSON, wait_until="load")
    assert page.locator("form.bf-fill").count() == 0
    nb = nbformat.read(ROOT / LESSON.replace(".html", ".ipynb"), as_version=4)
    stored = next(c for c in nb.cells if c.get("id") == "c1own000").outputs[0]["text"].strip()
    assert stored in page.inner_text("main")  # the first cell's guesses, as the notebook stores them
    assert not any("/course-model/" in url for url in requests)


def test_other_pages_stay_light(site):
    html = site[0]
    pages = [p.relative_to(html).as_posix() for p in sorted((html / "book").glob("*.html"))]
    assert LESSON in pages
    for doc in pages:
        text = (html / doc).read_text(encoding="utf-8")
        assert ("fillmask.js" in text) == (doc == LESSON), doc


def test_left_problems_notices_what_leaves_the_site():
    manager = "https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js"
    assert left_problems([manager], 1) == []
    assert left_problems([manager], 0) == [f"left the site after the page loaded: {manager}"]
    assert left_problems(["https://huggingface.co/x"], 1) == ["left the site at load: https://huggingface.co/x"]
