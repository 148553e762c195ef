"""The course model in the browser: lesson 1's own-sentence box timed in headless Chromium."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import threading
from pathlib import Path

#: What the browser measurement types in turn: lesson 1's two sentences, then news of each kind.
FILL_SENTENCES = (
    "the chancellor said the [MASK] would grow by 3% next year.",
    "manchester united [MASK] the match 2-1.",
    "the film won the [MASK] for best actor at the oscars.",
    "shares in the [MASK] fell sharply after the profit warning.",
    "the prime minister will [MASK] the election in [MASK].",
    "apple unveiled a new [MASK] that plays music and video.",
)
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: Every resource the page loaded, with its size on the wire and its body (same origin: both known).
_RESOURCES = "() => performance.getEntriesByType('resource').map(e => [e.name, e.transferSize, e.decodedBodySize])"


def fill_page(folder: Path, model_folder: Path, done: dict) -> Path:
    """A minimal site in ``folder``: one page with lesson 1's cell (tagged ``browser-fill``), the page's
    script and style, and the model exported in ``model_folder`` (``done``: :func:`webmodel.site_export`'s
    result). Returns the page."""
    from bertfamily import webmodel

    webmodel.write_static(folder / "_static", model_folder)
    page = folder / "index.html"
    page.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>fill</title>'
        f'<script>window.BERTFAMILY_MODEL = {json.dumps(webmodel.page_settings(done))};</script>'
        '<script src="_static/fillmask.js"></script><link rel="stylesheet" href="_static/fillmask.css">'
        f'</head><body><main><div class="cell tag_{webmodel.TAG}"><div class="cell_output">'
        "a widget that needs a kernel</div></div></main></body></html>",
        encoding="utf-8",
    )
    return page


def measure_fill(page, sentences=FILL_SENTENCES, timeout_ms: int = 120000) -> dict:
    """On an open page with the form, type each sentence and press Enter, as a reader does; wait for the
    guesses. Times come from the page (``performance.now``): the first from the reader's first request
    (Enter) to the first guesses shown, model download included; then each guess after it. Bytes: what
    the page loaded before the first request, and what that request downloaded."""
    page.wait_for_selector("form.bf-fill input", timeout=timeout_ms)
    before = page.evaluate(_RESOURCES)
    shown = []
    for n, text in enumerate(sentences, 1):
        page.fill("form.bf-fill input", text)
        page.press("form.bf-fill input", "Enter")
        page.wait_for_function("n => window.bertfamilyFill.timings.guesses.length >= n", arg=n, timeout=timeout_ms)
        shown.append(
            page.eval_on_selector_all(".bf-fill-guesses", "els => els.map(e => JSON.parse(e.dataset.guesses))")
        )
    timings = page.evaluate("() => window.bertfamilyFill.timings")
    after = page.evaluate(_RESOURCES)
    seen = {name for name, *_ in before}
    downloaded = [(name, size, body) for name, size, body in after if name not in seen]
    times = [(g["shown"] - g["started"]) / 1000 for g in timings["guesses"]]
    return {
        "sentences": len(sentences),
        "errors": [g["error"] for g in timings["guesses"] if g["error"]],
        "page_bytes": sum(body for _, _, body in before),
        "download_bytes": sum(body for *_, body in downloaded),
        "downloaded": sorted(name.rsplit("/", 1)[-1] for name, *_ in downloaded),  # fetched side by side
        "load_s": round((timings["loaded"] - timings["requested"]) / 1000, 3),
        "first_guess_s": round(times[0], 3),
        "guess_s": [round(t, 3) for t in times[1:]],
        "median_guess_s": round(statistics.median(times[1:]), 3) if len(times) > 1 else None,
        "guesses": shown,
    }


def browser_fill_times(
    model_folder: Path | None = None, sentences=FILL_SENTENCES, chromium: Path = CHROMIUM, driver=None
) -> dict:
    """The course model in headless Chromium, offline: a minimal page with lesson 1's form (:func:`fill_page`)
    served on localhost, :func:`measure_fill` on it. ``model_folder``: an export (default: the course model,
    exported into a temporary folder). Requests leaving the site are blocked and listed (``left_site``).
    ``driver``: a running Playwright (one process holds one; default: one started here)."""
    import functools
    import http.server

    from playwright.sync_api import sync_playwright

    from bertfamily import webmodel

    if not Path(chromium).is_file():
        raise FileNotFoundError(f"no Chromium at {chromium} (apt-get install chromium, or set CHROMIUM)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if model_folder is None:
            model_folder = tmp / "export"
            done = webmodel.site_export(model_folder)
        else:
            done = {
                "bytes": webmodel.download_bytes(model_folder),
                "parameters": sum(t["count"] for t in webmodel.read(model_folder)[0]["tensors"]),
            }
        fill_page(tmp / "site", Path(model_folder), done)
        handler = functools.partial(_quiet_handler(), directory=str(tmp / "site"))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base, left = f"http://127.0.0.1:{server.server_address[1]}/", []
        try:
            with contextlib.nullcontext(driver) if driver is not None else sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
                context = browser.new_context()
                context.route(
                    "**/*",
                    lambda route: (
                        route.continue_()
                        if route.request.url.startswith(base)
                        else (left.append(route.request.url), route.abort())
                    ),
                )
                page = context.new_page()
                page.goto(base + "index.html", wait_until="load")
                result = measure_fill(page, sentences)
                result["browser"] = browser.version
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    return {
        **result,
        "left_site": left,
        "model_bytes": done["bytes"],
        "status": "ok" if not result["errors"] and not left else "failed",
    }


def outside_event_loop(function, *args, **kwargs):
    """``function(*args, **kwargs)``, in a thread of its own where this one runs an asyncio loop: Playwright's
    sync API refuses to start inside one (a Playwright already started in this process, say by a test, runs
    one in its thread)."""
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args, **kwargs).result()


def browser_fill_record(result: dict | None = None) -> dict:
    """:func:`browser_fill_times` of the course model (or ``result``, one of its results) as the benchmark's
    result records it: the guesses counted, not kept."""
    result = outside_event_loop(browser_fill_times) if result is None else result
    return {**{k: v for k, v in result.items() if k != "guesses"}, "guesses": sum(len(g) for g in result["guesses"])}


def _quiet_handler():
    import http.server

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    return Quiet
