"""The lessons' browser widgets (``bertfamily.widgets``): their Python side, and their JavaScript in Chromium.

The Python side: the readout stored in each output is the package's own numbers; bad arguments get a
clear error. The JavaScript: the three widgets, written by the package into one page here (no book
build), are driven in headless Chromium by the checks of tests/widget_checks.py, which compare every
value the page shows with the package's functions. tests/test_browser.py runs the same checks on the
lessons' pages of the built website.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch

from bertfamily import losses, quantization, widgets
from bertfamily.browserwidget import PY_FORMAT_JS
from bertfamily.models import minilm_tokenizer

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
LOGITS = torch.tensor([5.0, 2.0, 0.5, 0.5, -0.4], dtype=torch.float64)  # lesson 2's teacher
CLASSES = ["cat", "dog", "fox", "cow", "house"]
SENTENCE = "england beat fiji 26-21 in a dramatic final in hong kong."


@pytest.fixture(scope="module")
def tokenizer():
    return minilm_tokenizer()


def test_temperature_readout_is_the_package_s(tokenizer):
    for T in (0.25, 1.0, 3.0, 10.0):
        r = widgets.temperature_readout(LOGITS, CLASSES, T)
        p = losses.soften(LOGITS, T)
        assert r["probabilities"] == [f"{v:.1%}" for v in p.tolist()]
        assert r["summary"] == (
            f"T = {T:.2f}: others {float(losses.non_target_mass(p)):.1%}, entropy {float(losses.entropy(p)):.2f} nats"
        )
    w = widgets.temperature(LOGITS, CLASSES, value=3.0)
    assert repr(w).startswith(widgets.temperature_readout(LOGITS, CLASSES, 3.0)["summary"])
    assert re.search(r'<label for="([^"]+)">Temperature T</label><input type="range" id="\1"', w._repr_html_())


def test_size_readout_is_size_calculator_s():
    r = quantization.size_calculator(12, 768, 30522, 32, "bert")
    text = widgets.size_readout(12, 768, 30522, 32, "bert")
    assert text.startswith(f"{r['parameters']:,} parameters, {r['mib']:.1f} MiB at 32 bits")
    assert f"{r['factor']:.2f}x" in text
    w = widgets.size_calculator()
    assert repr(w) == widgets.size_readout() and w.html.count("<label for=") == 5


def test_remasking_stores_mask_tokens_first_mask(tokenizer):
    from bertfamily.masking import actions, mask_tokens, masking_vocabulary, render

    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    w = widgets.remasking(ids, tokenizer, probability=0.3, seed=4)
    vocab = masking_vocabulary(tokenizer)
    generator = torch.Generator().manual_seed(4)
    torch.randperm(vocab["vocab_size"], generator=generator)  # the sample is drawn first
    corrupted, labels = mask_tokens(ids, probability=0.3, generator=generator, **vocab)
    codes = actions(ids, corrupted, labels, vocab["mask_token_id"])[0]
    tokens = tokenizer.convert_ids_to_tokens(ids[0])
    assert repr(w).splitlines()[0] == render(tokens, tokenizer.convert_ids_to_tokens(corrupted[0]), codes)
    data = json.loads(re.search(r'class="bf-data">(.*?)</script>', w.html).group(1))
    assert data["blocked"] == [t in ("[CLS]", "[SEP]") for t in tokens]
    assert len(data["sample_ids"]) == 1000 == len(data["sample_tokens"].split(" "))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: widgets.temperature(LOGITS, CLASSES[:3]), "one class name per logit"),
        (lambda: widgets.temperature(LOGITS, CLASSES, value=20), "from 0.25 to 10.0"),
        (lambda: widgets.temperature(LOGITS, CLASSES, low=0), "> 0"),
        (lambda: widgets.size_calculator(layers=30), "layers must be an integer from 1 to 24"),
        (lambda: widgets.size_calculator(hidden=100), "in steps of 64"),
        (lambda: widgets.size_calculator(bits=3), "bits must be one of 32, 16, 8, 4"),
        (lambda: widgets.size_calculator(layout="gpt"), "layout must be one of distilbert, bert"),
    ],
)
def test_bad_arguments_say_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_remasking_bad_arguments(tokenizer):
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    with pytest.raises(ValueError, match="from 0.05 to 0.6"):
        widgets.remasking(ids, tokenizer, probability=0.9)
    with pytest.raises(ValueError, match="one row of ids"):
        widgets.remasking(ids.repeat(2, 1), tokenizer)


def test_element_ids_are_unique_and_stable():
    a, b = widgets.size_calculator(), widgets.size_calculator()
    ids = [re.search(r'id="(bf-[^"]+)"', w.html).group(1) for w in (a, b)]
    assert ids[0] != ids[1] and ids[0].rsplit("-", 1)[0] == ids[1].rsplit("-", 1)[0]


@pytest.fixture(scope="module")
def widget_page(tmp_path_factory, tokenizer, playwright_driver):
    """The three widgets in one page of their own, open in headless Chromium (no request allowed out)."""
    if not CHROMIUM.is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)")
    from helpers import CHROMIUM_ARGS

    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    parts = [widgets.temperature(LOGITS, CLASSES), widgets.size_calculator(), widgets.remasking(ids, tokenizer)]
    path = tmp_path_factory.mktemp("widgets") / "page.html"
    path.write_text(
        "<!doctype html><html><body>" + "".join(w._repr_html_() for w in parts) + "</body></html>", encoding="utf-8"
    )
    browser = playwright_driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    page = browser.new_page()
    requests, errors = [], []
    page.on("request", lambda r: not r.url.startswith("file://") and requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    page.goto(path.as_uri())
    yield page, requests, errors
    browser.close()


def test_widgets_compute_python_s_numbers_in_chromium(widget_page, tokenizer):
    import widget_checks as checks

    page, requests, errors = widget_page
    problems = checks.temperature_problems(page.locator(checks.SELECTORS["temperature"]))
    problems += checks.size_problems(page.locator(checks.SELECTORS["sizes"]))
    problems += checks.remask_problems(page.locator(checks.SELECTORS["remask"]), tokenizer)
    problems += [f"script error: {e}" for e in errors] + [f"request out of the page: {r}" for r in requests]
    assert not problems, "\n".join(problems[:20])


def test_py_format_js_formats_as_python(widget_page):
    """The page's formatter against Python's format on ties (where toFixed rounds half up and Python
    half to even), tiny, large and random numbers."""
    page = widget_page[0]
    rng = torch.Generator().manual_seed(0)
    xs = [0.25, 0.125, 2.5, 1.375, 0.5, 1.5, 0.0, 1e-9, 4.2e-10, 123456.789, 9.995, 0.045, 99.95, 1e6 / 3]
    xs += (
        torch.rand(200, generator=rng, dtype=torch.float64) * 10 ** torch.randint(-6, 6, (200,), generator=rng)
    ).tolist()
    cases = [(x, d) for x in xs for d in (0, 1, 2)]
    shown = page.evaluate(
        "cases => { " + PY_FORMAT_JS + " return cases.map(c => [bfFixed(c[0], c[1]),"
        " bfPercent(c[0], c[1]), bfGroup(Math.round(c[0] * 1000))]); }",
        cases,
    )
    want = [[f"{x:.{d}f}", f"{x:.{d}%}", f"{round(x * 1000):,}"] for x, d in cases]
    wrong = [(c, s, w) for c, s, w in zip(cases, shown, want, strict=True) if s != w]
    assert not wrong, wrong[:5]


def test_the_checks_notice_a_wrong_number(widget_page, tokenizer):
    """A check that cannot fail is not a check: break each widget's arithmetic in the page, and its
    check reports it."""
    import widget_checks as checks

    page, _, _ = widget_page
    page.reload()
    page.evaluate("""() => {
        const f = window.Math.exp; window.Math.exp = x => f(1.01 * x);  // the softmax drifts
        const c = Math.ceil; Math.ceil = x => c(1.001 * x);  // the calculator 0.1% off
    }""")
    for name in ("temperature", "sizes"):  # the scripts ran before the change: move them again
        page.locator(checks.SELECTORS[name]).locator("input").first.fill("2")
    t = checks.temperature_problems(page.locator(checks.SELECTORS["temperature"]), values=[0.25, 0.5, 1.0, 7.75])
    s = checks.size_problems(page.locator(checks.SELECTORS["sizes"]), settings=checks.size_combinations(10))
    assert t and s
    page.reload()
    page.evaluate("""() => { const root = document.querySelector('.bf-remask');
        const data = root.querySelector('script.bf-data'); const d = JSON.parse(data.textContent);
        root.querySelector('button').addEventListener('click', () => {  // the 80/10/10 shown wrongly
            root.querySelector('.bf-sentence').textContent =
                root.querySelector('.bf-sentence').textContent.replace('[MASK]', '(' + d.tokens[1] + ')'); }); }""")
    assert checks.remask_problems(
        page.locator(checks.SELECTORS["remask"]), tokenizer, probabilities=(0.6,), clicks=4, many=0
    )
