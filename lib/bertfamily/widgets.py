"""Interactive cells that compute in the reader's browser: on the website (no kernel), in Jupyter and Colab.

Each function returns a :class:`~bertfamily.browserwidget.BrowserWidget`: one HTML output with
labelled controls, the data they need embedded as JSON, and a few lines of plain JavaScript that
recompute the readout as a control moves (the frame, its style and Python's number formats in
JavaScript are :mod:`bertfamily.browserwidget`'s). Nothing is loaded from anywhere (no library, no
CDN, no request), so the same output works on the static page, in JupyterLab and Notebook (once the
cell has run: a notebook opened from disk is untrusted and shows the stored readout), in Colab's
output frame and on Binder.

The readout the HTML holds before any script runs is computed here, by the course's own functions;
it is what a reader without JavaScript sees (the lesson's static figure stays beside it). The
JavaScript repeats the same formulas on the same inputs, and formats numbers as Python's
``format`` does (round half to even on the exact binary value, where ``toFixed`` rounds half up);
``tests/test_browser.py`` sets each control to many values in Chromium and compares the page's
text with the functions here.

* :func:`temperature`: lesson 2's softened distribution, the mass outside the top class and the
  entropy, as a slider moves the temperature;
* :func:`size_calculator`: lesson 3's parameters, MiB and factor against BERT-base of a
  BERT-shaped model from its layers, width, vocabulary, bits and layout;
* :func:`remasking`: lesson 1's sentence masked afresh at each click, BERT's 80/10/10 shown.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from bertfamily.browserwidget import BrowserWidget, check_range, element_id, page

__all__ = ["temperature", "temperature_readout", "size_calculator", "size_readout", "remasking", "remasking_readout"]


# --------------------------------------------------------------------------- lesson 2: temperature


def temperature_readout(logits, classes: Sequence[str], T: float) -> dict:
    """The temperature widget's text at ``T``: each class's probability, and the summary line.

    Computed by :mod:`bertfamily.losses` (``soften``, ``non_target_mass``, ``entropy``) in float64.
    """
    import torch

    from bertfamily import losses

    z = torch.as_tensor(logits, dtype=torch.float64)
    p = losses.soften(z, T)
    mass, H = float(losses.non_target_mass(p)), float(losses.entropy(p))
    return {
        "values": p.tolist(),
        "probabilities": [f"{v:.1%}" for v in p.tolist()],
        "summary": f"T = {T:.2f}: others {mass:.1%}, entropy {H:.2f} nats",
    }


_TEMPERATURE_JS = r"""
var slider = q('input'), bars = root.querySelectorAll('.bf-bar'), values = root.querySelectorAll('.bf-p');
function update() {
  var T = +slider.value, z = data.logits.map(function (v) { return v / T; });
  var m = Math.max.apply(null, z), e = z.map(function (v) { return Math.exp(v - m); });
  var s = e.reduce(function (a, b) { return a + b; }, 0), r = 1 / s;
  var p = e.map(function (v) { return v * r; });
  var top = Math.max.apply(null, p), mass = 1 - top, H = 0;
  p.forEach(function (v) { H -= v * Math.log(Math.max(v, 2.2250738585072014e-308)); });
  p.forEach(function (v, i) { bars[i].style.width = (100 * v) + '%'; values[i].textContent = bfPercent(v, 1); });
  q('output').textContent = bfFixed(T, 2);
  q('.bf-readout').textContent = 'T = ' + bfFixed(T, 2) + ': others ' + bfPercent(mass, 1) +
    ', entropy ' + bfFixed(H, 2) + ' nats';
}
slider.addEventListener('input', update);
update();
"""


def temperature(
    logits,
    classes: Sequence[str],
    *,
    value: float = 1.0,
    low: float = 0.25,
    high: float = 10.0,
    step: float = 0.25,
    colors: Sequence[str] | None = None,
) -> BrowserWidget:
    """A temperature slider over ``softmax(logits / T)``: the bars, the mass outside the top class
    and the entropy follow it in the browser."""
    from bertfamily.plots import COLORS

    logits = [float(v) for v in (logits.tolist() if hasattr(logits, "tolist") else logits)]
    classes = [str(c) for c in classes]
    if len(logits) < 2 or len(classes) != len(logits):
        raise ValueError(
            f"give one class name per logit (at least two); got {len(logits)} logits and {len(classes)} names"
        )
    if not low > 0:
        raise ValueError(f"the lowest temperature must be > 0, got {low!r}")
    check_range("the temperature", value, low, high, step)
    top = max(range(len(logits)), key=logits.__getitem__)
    colors = (
        list(colors) if colors else [COLORS["teacher"] if i == top else COLORS["student"] for i in range(len(logits))]
    )
    readout = temperature_readout(logits, classes, value)
    data = {"logits": logits}
    uid = element_id("temperature", {"logits": logits, "classes": classes, "value": value})
    rows = "".join(
        f'<span>{html.escape(c)}</span><div><div class="bf-bar" style="background:{colors[i]};'
        f'width:{100 * readout["values"][i]:.1f}%"></div></div>'
        f'<span class="bf-p">{readout["probabilities"][i]}</span>'
        for i, c in enumerate(classes)
    )
    body = (
        f'<div class="bf-controls"><label for="{uid}-T">Temperature T</label>'
        f'<input type="range" id="{uid}-T" min="{low}" max="{high}" step="{step}" value="{value}">'
        f'<output for="{uid}-T">{value:.2f}</output></div>'
        f'<div class="bf-bars" role="img" aria-label="softened distribution">{rows}</div>'
        f'<p class="bf-readout" aria-live="polite">{html.escape(readout["summary"])}</p>'
    )
    shares = zip(classes, readout["probabilities"], strict=True)
    text = f"{readout['summary']}\n" + "  ".join(f"{c} {p}" for c, p in shares)
    return BrowserWidget(
        "temperature",
        page(
            "temperature",
            uid,
            data,
            body,
            _TEMPERATURE_JS,
            "Without JavaScript the slider does not move; the figure below "
            "draws the same quantities for every temperature.",
        ),
        text,
    )


# --------------------------------------------------------------------------- lesson 3: sizes

#: The size calculator's controls and their choices (lesson 3).
SIZE_CHOICES = {
    "layers": (1, 24, 1),
    "hidden": (128, 1024, 64),
    "vocab": (30522, 50265, 119547, 250002),
    "bits": (32, 16, 8, 4),
    "layout": ("distilbert", "bert"),
}


def size_readout(
    layers: int = 6, hidden: int = 768, vocab: int = 30522, bits: int = 8, layout: str = "distilbert"
) -> str:
    """The calculator's sentence, from :func:`bertfamily.quantization.size_calculator`."""
    from bertfamily import quantization

    r = quantization.size_calculator(layers, hidden, vocab, bits, layout)
    return (
        f"{r['parameters']:,} parameters, {r['mib']:.1f} MiB at {bits} bits, "
        f"{r['factor']:.2f}x smaller than BERT-base in fp32"
    )


def _layout_constants() -> dict:
    """What each layout adds beyond layers, width and vocabulary, read from transformers' configs
    through :mod:`bertfamily.budget` (as ``size_calculator`` reads them)."""
    from transformers import BertConfig, DistilBertConfig

    from bertfamily import budget

    out = {}
    for name, config in (("distilbert", DistilBertConfig()), ("bert", BertConfig())):
        s = budget.sizes(config)
        out[name] = {
            "positions": s.positions,
            "segments": s.segments,
            "pooler": s.pooler,
            "ffn": s.intermediate // s.hidden,
        }
    return out


_SIZE_JS = r"""
var names = ['layers', 'hidden', 'vocab', 'bits', 'layout'];
function update() {
  var v = {};
  names.forEach(function (n) { v[n] = q('[name=' + n + ']').value; });
  var L = +v.layers, H = +v.hidden, V = +v.vocab, bits = +v.bits, c = data.layouts[v.layout], I = c.ffn * H;
  var layer = 4 * (H * H + H) + (H * I + I) + (I * H + H) + 4 * H;
  var n = (V + c.positions + c.segments) * H + 2 * H + L * layer + (c.pooler ? H * H + H : 0);
  var bytes = Math.ceil(n * bits / 8), mib = bytes / 1048576;
  q('output[for$=layers]').textContent = L;
  q('output[for$=hidden]').textContent = H;
  q('.bf-readout').textContent = bfGroup(n) + ' parameters, ' + bfFixed(mib, 1) + ' MiB at ' + bits +
    ' bits, ' + bfFixed(data.reference_bytes / bytes, 2) + 'x smaller than BERT-base in fp32';
}
root.querySelectorAll('input, select').forEach(function (e) {
  e.addEventListener('input', update); e.addEventListener('change', update);
});
update();
"""


def size_calculator(
    layers: int = 6, hidden: int = 768, vocab: int = 30522, bits: int = 8, layout: str = "distilbert"
) -> BrowserWidget:
    """Lesson 3's compression calculator: two sliders and three lists, the budget recomputed in the browser."""
    from bertfamily import budget, quantization
    from bertfamily.models import published_config

    choices = SIZE_CHOICES
    for name, value in (("layers", layers), ("hidden", hidden)):
        low, high, step = choices[name]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high or value % step:
            raise ValueError(f"{name} must be an integer from {low} to {high} in steps of {step}, got {value!r}")
    for name, value in (("vocab", vocab), ("bits", bits), ("layout", layout)):
        if value not in choices[name]:
            raise ValueError(f"{name} must be one of {', '.join(map(str, choices[name]))}; got {value!r}")
    readout = size_readout(layers, hidden, vocab, bits, layout)
    reference = budget.to_bytes(budget.count(published_config(quantization.REFERENCE)), 32)
    data = {"layouts": _layout_constants(), "reference_bytes": reference}
    uid = element_id("sizes", {"start": [layers, hidden, vocab, bits, layout]})
    labels = {"layers": "Layers", "hidden": "Width", "vocab": "Vocabulary", "bits": "Bits", "layout": "Layout"}
    start = {"layers": layers, "hidden": hidden, "vocab": vocab, "bits": bits, "layout": layout}
    controls = []
    for name in ("layers", "hidden"):
        low, high, step = choices[name]
        controls.append(
            f'<span><label for="{uid}-{name}">{labels[name]}</label>'
            f'<input type="range" id="{uid}-{name}" name="{name}" min="{low}" max="{high}" '
            f'step="{step}" value="{start[name]}"> <output for="{uid}-{name}">{start[name]}</output>'
            "</span>"
        )
    for name in ("vocab", "bits", "layout"):
        options = "".join(
            f'<option value="{o}"{" selected" if o == start[name] else ""}>'
            f'{f"{o:,}" if name == "vocab" else o}</option>'
            for o in choices[name]
        )
        controls.append(
            f'<span><label for="{uid}-{name}">{labels[name]}</label>'
            f'<select id="{uid}-{name}" name="{name}">{options}</select></span>'
        )
    body = (
        f'<div class="bf-controls">{"".join(controls)}</div>'
        f'<p class="bf-readout" aria-live="polite">{html.escape(readout)}</p>'
        '<p class="bf-note">distilbert: no segment table, no pooler; bert: both. Feed-forward 4 × width, '
        "512 positions; every parameter stored at the chosen bits.</p>"
    )
    return BrowserWidget(
        "sizes",
        page(
            "sizes",
            uid,
            data,
            body,
            _SIZE_JS,
            "Without JavaScript the controls do not compute; the figure below "
            "draws the size against depth for three bit widths.",
        ),
        readout,
    )


# --------------------------------------------------------------------------- lesson 1: re-masking


def remasking_readout(tokens: Sequence[str], corrupted_tokens: Sequence[str], codes) -> dict:
    """The re-masking widget's text for one mask: the sentence as :func:`bertfamily.masking.render`
    draws it and how many of the pieces that may be chosen were."""
    import torch

    from bertfamily.masking import render

    codes = torch.as_tensor(codes)
    return {"sentence": render(tokens, corrupted_tokens, codes), "chosen": int(codes.ne(0).sum())}


def _marked(tokens, corrupted_tokens, codes) -> str:
    """:func:`bertfamily.masking.render`'s text as HTML, each chosen piece marked by what it became
    (the spans the page's script writes too)."""
    from bertfamily.masking import render

    shown = []
    for original, new, code in zip(tokens, corrupted_tokens, codes.tolist(), strict=True):
        text = html.escape(render([original], [new], [code]))
        shown.append(f'<span class="bf-a{code}">{text}</span>' if code else text)
    return " ".join(shown)


_REMASK_JS = r"""
var slider = q('input'), button = q('button'), total = {masks: 0, chosen: 0, a1: 0, a2: 0, a3: 0};
var sample = data.sample_ids, words = data.sample_tokens.split(' '), vocab = {};
sample.forEach(function (id, i) { vocab[id] = words[i]; });
function esc(s) { return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'); }
function draw() {
  var p = +slider.value, split = data.split, n = data.ids.length;
  var select = [], action = [], randomIds = [], shown = [], chosen = 0, counts = [0, 0, 0, 0];
  for (var i = 0; i < n; i++) {
    select.push(Math.random()); action.push(Math.random());
    randomIds.push(sample[Math.floor(Math.random() * sample.length)]);
  }
  for (var i = 0; i < n; i++) {
    var id = data.ids[i], pick = select[i] < p && !data.blocked[i], out = id, code = 0;
    if (pick && action[i] >= split[0] && action[i] < split[0] + split[1]) out = randomIds[i];
    if (pick && action[i] < split[0]) out = data.mask_id;
    if (pick) code = out === data.mask_id ? 1 : out === id ? 3 : 2;
    var word = data.tokens[i];
    var text = [word, '[MASK]', '<' + vocab[out] + '>', '(' + word + ')'][code];
    shown.push(code ? '<span class="bf-a' + code + '">' + esc(text) + '</span>' : esc(text));
    counts[code]++; if (code) chosen++;
  }
  root.setAttribute('data-draws', JSON.stringify({probability: p, select: select, action: action,
                                                  random_ids: randomIds}));
  total.masks++; total.chosen += chosen; total.a1 += counts[1]; total.a2 += counts[2]; total.a3 += counts[3];
  q('output').textContent = bfFixed(p, 2);
  q('.bf-sentence').innerHTML = shown.join(' ');
  q('.bf-count').textContent = chosen + ' of ' + data.choosable + ' word pieces chosen';
  var c = total.chosen || 1;
  q('.bf-tally').textContent = 'Over ' + total.masks + (total.masks === 1 ? ' mask' : ' masks') +
    ' at probability ' + bfFixed(p, 2) + ': ' + bfPercent(total.chosen / (total.masks * data.choosable), 1) +
    ' of the pieces chosen; of those, ' + bfPercent(total.a1 / c, 0) + ' [MASK], ' + bfPercent(total.a2 / c, 0) +
    ' random, ' + bfPercent(total.a3 / c, 0) + ' kept.';
}
button.addEventListener('click', draw);
slider.addEventListener('input', function () {
  total = {masks: 0, chosen: 0, a1: 0, a2: 0, a3: 0}; draw();
});
"""


def remasking(input_ids, tokenizer, *, probability: float = 0.15, sample: int = 1000, seed: int = 0) -> BrowserWidget:
    """Lesson 1's sentence masked afresh at each click of a button, at the slider's probability.

    The browser applies :func:`bertfamily.masking.mask_tokens`' rule to its own uniform draws (one
    to choose a position, one for what it becomes, a random piece), and keeps them in the widget's
    ``data-draws`` attribute so that a test can hand the same draws to ``mask_tokens``. The random
    replacement comes from ``sample`` word pieces drawn uniformly from the vocabulary (seeded by
    ``seed``; the whole vocabulary would weigh a few hundred kB). The readout before the first click
    is ``mask_tokens`` with a generator seeded by ``seed``.
    """
    import torch

    from bertfamily.masking import actions, as_batch, mask_tokens, masking_vocabulary

    ids = as_batch(input_ids)
    if ids.shape[0] != 1:
        raise ValueError(f"remasking shows one sentence: give one row of ids, got {ids.shape[0]}")
    check_range("the masking probability", probability, 0.05, 0.6, 0.05)
    vocab = masking_vocabulary(tokenizer)
    if not isinstance(sample, int) or not 1 <= sample <= vocab["vocab_size"]:
        raise ValueError(f"sample must be a number of word pieces from 1 to {vocab['vocab_size']}, got {sample!r}")
    generator = torch.Generator().manual_seed(seed)
    sample_ids = sorted(torch.randperm(vocab["vocab_size"], generator=generator)[:sample].tolist())
    words = tokenizer.convert_ids_to_tokens(sample_ids)
    if any(not w or " " in w for w in words):
        raise ValueError("remasking needs word pieces without spaces (a WordPiece vocabulary)")
    corrupted, labels = mask_tokens(ids, probability=probability, generator=generator, **vocab)
    codes = actions(ids, corrupted, labels, vocab["mask_token_id"])[0]
    row = ids[0].tolist()
    tokens = tokenizer.convert_ids_to_tokens(row)
    blocked = [i in set(vocab["special_ids"]) or i == vocab["pad_token_id"] for i in row]
    corrupted_tokens = tokenizer.convert_ids_to_tokens(corrupted[0])
    readout = remasking_readout(tokens, corrupted_tokens, codes)
    data = {
        "ids": row,
        "tokens": tokens,
        "blocked": blocked,
        "mask_id": vocab["mask_token_id"],
        "split": [0.8, 0.1, 0.1],
        "sample_ids": sample_ids,
        "choosable": blocked.count(False),
        "sample_tokens": " ".join(words),
    }
    uid = element_id("remask", {"ids": row, "probability": probability, "seed": seed})
    count = f"{readout['chosen']} of {data['choosable']} word pieces chosen"
    body = (
        f'<div class="bf-controls"><label for="{uid}-p">Masking probability</label>'
        f'<input type="range" id="{uid}-p" min="0.05" max="0.6" step="0.05" value="{probability}">'
        f'<output for="{uid}-p">{probability:.2f}</output>'
        '<button type="button">New mask</button></div>'
        f'<p class="bf-sentence" aria-live="polite">{_marked(tokens, corrupted_tokens, codes)}</p>'
        f'<p class="bf-count">{count}</p><p class="bf-tally bf-note"></p>'
        f'<p class="bf-note">[MASK]: masked; &lt;piece&gt;: a random piece (here from {sample:,} of the '
        f'vocabulary\'s {vocab["vocab_size"]:,}); (piece): kept, but predicted.</p>'
    )
    text = f"{readout['sentence']}\n{count}"
    return BrowserWidget(
        "remask",
        page(
            "remask",
            uid,
            data,
            body,
            _REMASK_JS,
            "Without JavaScript the button does nothing: this is one mask; the figure below shows ten epochs of masks.",
        ),
        text,
    )
