"""Checks of the lessons' browser widgets (``bertfamily.widgets``) on a page open in Chromium.

Each check sets a widget's controls to several values, the way a reader does (Playwright's fill,
select and click, and the keyboard), reads the text the page shows, and compares it with what the
course's Python computes for the same values; it returns a list of problems. The built site's pages
(tests/test_browser.py) and a page written here from the package (tests/test_browser_widgets.py) go
through the same checks.
"""

from __future__ import annotations

import itertools
import json
import random
from unittest import mock

import torch

from bertfamily import widgets
from bertfamily.masking import actions, mask_tokens, masking_vocabulary, render

#: Widgets are found by these classes; ``data-ready`` is set once a widget's script has run.
SELECTORS = {"temperature": ".bf-temperature", "sizes": ".bf-sizes", "remask": ".bf-remask"}


def data_of(root) -> dict:
    """The JSON a widget embeds (its inputs), as the page holds it."""
    return json.loads(root.locator("script.bf-data").text_content())


def ready_problems(root, name: str) -> list[str]:
    """The widget's script ran; every control is reachable by keyboard and has a label."""
    if root.get_attribute("data-ready") != "1":
        return [f"{name}: the widget's script did not run"]
    unlabelled = root.evaluate(
        "r => Array.from(r.querySelectorAll('input, select, button')).filter(e => e.tagName === 'BUTTON'"
        " ? !e.textContent.trim() : !(e.id && r.querySelector('label[for=\"' + e.id + '\"]')))"
        ".map(e => e.outerHTML.slice(0, 80))"
    )
    problems = [f"{name}: control without a label: {u}" for u in unlabelled]
    untabbable = root.evaluate(
        "r => Array.from(r.querySelectorAll('input, select, button')).filter(e => e.tabIndex < 0 || e.disabled).length"
    )
    if untabbable:
        problems.append(f"{name}: {untabbable} controls cannot be reached with the Tab key")
    return problems


def temperature_problems(root, values=None, keys: bool = True) -> list[str]:
    """Lesson 2's slider at each temperature: every class's share and the summary line as Python's
    (and, with ``keys``, moved by the arrow keys)."""
    problems = ready_problems(root, "temperature")
    if problems:
        return problems
    data = data_of(root)
    classes = root.locator(".bf-bars > span:not(.bf-p)").all_text_contents()
    slider = root.locator("input[type=range]")
    low, high, step = (float(slider.get_attribute(a)) for a in ("min", "max", "step"))
    n = round((high - low) / step)
    values = values or [low + i * step for i in range(n + 1)]  # every position of the slider

    def compare(T, how):
        want = widgets.temperature_readout(data["logits"], classes, T)
        shown = root.locator(".bf-readout").text_content()
        shares = root.locator(".bf-p").all_text_contents()
        found = []
        if shown != want["summary"]:
            found.append(f"temperature {T} ({how}): page {shown!r}, Python {want['summary']!r}")
        if shares != want["probabilities"]:
            found.append(f"temperature {T} ({how}): shares {shares}, Python {want['probabilities']}")
        return found

    for T in values:
        slider.fill(str(T))
        problems += compare(T, "set")
    if not keys:
        return problems
    slider.fill(str(low))
    slider.focus()
    for k in range(1, 4):  # the keyboard moves it one step at a time
        slider.press("ArrowRight")
        problems += compare(low + k * step, "arrow key")
    return problems


def size_combinations(count: int = 40, seed: int = 0) -> list[dict]:
    """``count`` settings of the calculator drawn at random, and its corners."""
    c = widgets.SIZE_CHOICES
    layers = range(c["layers"][0], c["layers"][1] + 1, c["layers"][2])
    hidden = range(c["hidden"][0], c["hidden"][1] + 1, c["hidden"][2])
    rng = random.Random(seed)
    picks = [
        dict(
            layers=rng.choice(layers),
            hidden=rng.choice(hidden),
            vocab=rng.choice(c["vocab"]),
            bits=rng.choice(c["bits"]),
            layout=rng.choice(c["layout"]),
        )
        for _ in range(count)
    ]
    corners = [
        dict(layers=L, hidden=H, vocab=V, bits=b, layout=lay)
        for L, H, V, b, lay in itertools.product(
            (layers[0], layers[-1]), (hidden[0], hidden[-1]), (c["vocab"][0], c["vocab"][-1]), (32, 4), c["layout"]
        )
    ]
    return picks + corners


def size_problems(root, settings=None, keys: bool = True) -> list[str]:
    """Lesson 3's calculator at each setting: the page's sentence is ``widgets.size_readout``'s (and,
    with ``keys``, after an arrow key on the layers)."""
    problems = ready_problems(root, "sizes")
    if problems:
        return problems
    for s in settings or size_combinations():
        for name in ("layers", "hidden"):
            root.locator(f"input[name={name}]").fill(str(s[name]))
        for name in ("vocab", "bits", "layout"):
            root.locator(f"select[name={name}]").select_option(str(s[name]))
        shown, want = root.locator(".bf-readout").text_content(), widgets.size_readout(**s)
        if shown != want:
            problems.append(f"{s}: page {shown!r}, Python {want!r}")
    if not keys:
        return problems
    layers = root.locator("input[name=layers]")
    layers.fill("6")
    layers.focus()
    layers.press("ArrowRight")
    shown = root.locator(".bf-readout").text_content()
    want = widgets.size_readout(7, **{k: _value(root, k) for k in ("hidden", "vocab", "bits", "layout")})
    if shown != want:
        problems.append(f"the arrow key on the layers: page {shown!r}, Python {want!r}")
    return problems


def _value(root, name):
    value = root.locator(f"[name={name}]").input_value()
    return value if name == "layout" else int(value)


def mask_with_draws(ids, vocab: dict, draws: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """``mask_tokens`` itself, its three random draws replaced by the page's (``torch.rand`` twice,
    then ``torch.randint``), in the order it makes them."""
    shape = (1, len(ids))
    rands = iter(
        [torch.tensor([draws["select"]], dtype=torch.float64), torch.tensor([draws["action"]], dtype=torch.float64)]
    )
    random_ids = torch.tensor([draws["random_ids"]], dtype=torch.long)
    with (
        mock.patch("torch.rand", side_effect=lambda s, generator=None: next(rands)),
        mock.patch("torch.randint", side_effect=lambda high, s, generator=None: random_ids),
    ):
        corrupted, labels = mask_tokens(torch.tensor([ids]), probability=draws["probability"], **vocab)
    assert corrupted.shape == shape
    return corrupted[0], labels[0]


def remask_problems(
    root, tokenizer, probabilities=(0.05, 0.15, 0.3, 0.6), clicks: int = 15, many: int = 150
) -> list[str]:
    """Lesson 1's button at several probabilities: each mask the page shows is the one ``mask_tokens``
    makes from the same draws; the running tally adds those masks up; over ``many`` clicks the share
    chosen and the 80/10/10 split are within five standard errors of the rule's."""
    problems = ready_problems(root, "remask")
    if problems:
        return problems
    data = data_of(root)
    vocab = masking_vocabulary(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(data["ids"])
    if tokens != data["tokens"]:
        problems.append(f"the page's pieces {data['tokens']} are not the tokenizer's {tokens}")
    choosable = sum(i not in vocab["special_ids"] for i in data["ids"])
    slider, button = root.locator("input[type=range]"), root.locator("button")
    for p in probabilities:
        slider.fill(str(p))  # a new probability starts a new tally, with one mask
        total = torch.zeros(4, dtype=torch.long)
        for k in range(clicks):
            if k:
                button.press("Enter") if k % 2 else button.click()  # keyboard and mouse
            draws = json.loads(root.get_attribute("data-draws"))
            if draws["probability"] != p:
                problems.append(f"the page drew at probability {draws['probability']}, the slider says {p}")
            corrupted, labels = mask_with_draws(data["ids"], vocab, draws)
            codes = actions(torch.tensor(data["ids"]), corrupted, labels, vocab["mask_token_id"])
            total += torch.bincount(codes, minlength=4)
            want = render(tokens, tokenizer.convert_ids_to_tokens(corrupted), codes)
            shown = root.locator(".bf-sentence").text_content()
            if shown != want:
                problems.append(f"p = {p}, click {k}: page {shown!r}, mask_tokens {want!r}")
            count = root.locator(".bf-count").text_content()
            if count != f"{int(codes.ne(0).sum())} of {choosable} word pieces chosen":
                problems.append(f"p = {p}, click {k}: {count!r} for {int(codes.ne(0).sum())} chosen")
        chosen = int(total[1:].sum())
        c = max(chosen, 1)
        want = (
            f"Over {clicks} masks at probability {p:.2f}: {chosen / (clicks * choosable):.1%} of the "
            f"pieces chosen; of those, {int(total[1]) / c:.0%} [MASK], {int(total[2]) / c:.0%} random, "
            f"{int(total[3]) / c:.0%} kept."
        )
        if root.locator(".bf-tally").text_content() != want:
            problems.append(f"tally: page {root.locator('.bf-tally').text_content()!r}, expected {want!r}")
    if not many:
        return problems
    # the rule's rates, over many masks at 0.5
    slider.fill("0.5")
    counts = torch.zeros(4, dtype=torch.long)
    for _ in range(many):
        button.click()
        draws = json.loads(root.get_attribute("data-draws"))
        corrupted, labels = mask_with_draws(data["ids"], vocab, draws)
        counts += torch.bincount(
            actions(torch.tensor(data["ids"]), corrupted, labels, vocab["mask_token_id"]), minlength=4
        )
    n, chosen = many * choosable, int(counts[1:].sum())
    for what, k, trials, rate in (
        ("chosen", chosen, n, 0.5),
        ("[MASK]", int(counts[1]), chosen, 0.8),
        ("random", int(counts[2]), chosen, 0.1),
    ):
        sd = (rate * (1 - rate) / trials) ** 0.5
        if abs(k / trials - rate) > 5 * sd:
            problems.append(f"{what}: {k / trials:.3f} of {trials}, the rule's {rate} (5 sd = {5 * sd:.3f})")
    return problems
