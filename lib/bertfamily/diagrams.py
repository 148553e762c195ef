"""Conceptual diagrams, one per mechanism, drawn with matplotlib so that they are tested and
re-executed like every other figure. Each function returns the figure and an alt text for it
(for readers who cannot see the picture); a notebook cell shows the figure and passes the text to
myst-nb as the image's ``alt``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

from .plots import COLORS

__all__ = ["masking_schedules", "tlm_input", "albert_layout", "triple_loss", "quantization", "shared_vocabulary"]


def _positive(value, name: str) -> int:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _grid(ax, masks: torch.Tensor, title: str, color: str) -> None:
    epochs, tokens = masks.shape
    for e in range(epochs):
        for t in range(tokens):
            ax.add_patch(plt.Rectangle((t, epochs - 1 - e), 0.9, 0.9, color=color if masks[e, t] else "#e6e6e6"))
    ax.set(xlim=(-0.1, tokens), ylim=(-0.1, epochs), title=title, xlabel="token of one sentence")
    ax.set_yticks([epochs - 1 - e + 0.45 for e in range(epochs)], [f"epoch {e + 1}" for e in range(epochs)])
    ax.set_xticks([])
    ax.grid(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)


def masking_schedules(epochs: int = 5, tokens: int = 20, rate: float = 0.15, copies: int = 2, seed: int = 0):
    """Which tokens of one sentence are masked in each epoch: one static mask (BERT's single
    copy), ``copies`` static masks reused in turn (BERT's ``dupe_factor``), and a fresh mask per
    epoch (RoBERTa's dynamic masking). Returns ``(figure, alt text)``."""
    _positive(epochs, "epochs"), _positive(tokens, "tokens"), _positive(copies, "copies")
    if not 0 < rate < 1:
        raise ValueError(f"rate must be in (0, 1), got {rate}")
    g = torch.Generator().manual_seed(seed)
    k = max(1, round(rate * tokens))

    def draw():
        m = torch.zeros(tokens, dtype=torch.bool)
        m[torch.randperm(tokens, generator=g)[:k]] = True
        return m

    static = draw()
    pool = [static] + [draw() for _ in range(copies - 1)]
    schedules = {
        "one static mask": torch.stack([static] * epochs),
        f"{copies} static copies, in turn": torch.stack([pool[e % copies] for e in range(epochs)]),
        "dynamic: a new mask each epoch": torch.stack([draw() for _ in range(epochs)]),
    }
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.6), sharey=True)
    for ax, (title, masks), color in zip(
        axes, schedules.items(), (COLORS["static"], COLORS["albert"], COLORS["dynamic"]), strict=True
    ):
        _grid(ax, masks, title, color)
    fig.suptitle("Masked positions (coloured) of one sentence, epoch by epoch")
    distinct = {t: len({tuple(m.tolist()) for m in masks}) for t, masks in schedules.items()}
    alt = (
        f"Three grids of {epochs} epochs by {tokens} tokens. With one static mask the same {k} tokens are "
        f"masked in every epoch ({distinct['one static mask']} distinct pattern); with {copies} static "
        f"copies the patterns repeat every {copies} epochs; with dynamic masking each epoch masks "
        f"different tokens ({distinct['dynamic: a new mask each epoch']} distinct patterns)."
    )
    return fig, alt


def tlm_input(english, italian, masked=(), cls: str = "[CLS]", sep: str = "[SEP]"):
    """XLM's translation-LM input for one pair: the tokens, the language of each, positions that
    restart at 0 for the second sentence, and the masked tokens (indices into the concatenated
    ``[CLS] english [SEP] italian [SEP]``). Returns ``(figure, alt text)``."""
    english, italian = list(english), list(italian)
    if not english or not italian:
        raise ValueError("both sentences need at least one token")
    tokens = [cls] + english + [sep] + italian + [sep]
    langs = ["en"] * (len(english) + 2) + ["it"] * (len(italian) + 1)
    positions = list(range(len(english) + 2)) + list(range(len(italian) + 1))
    masked = set(masked)
    bad = [i for i in masked if not (isinstance(i, int) and 0 <= i < len(tokens)) or tokens[i] in (cls, sep)]
    if bad:
        raise ValueError(f"masked must index words of the pair (0..{len(tokens) - 1}, not {cls}/{sep}); bad: {bad}")
    fig, ax = plt.subplots(figsize=(max(6, 0.75 * len(tokens)), 2.2))
    rows = [
        ("token", lambda i: "[MASK]" if i in masked else tokens[i]),
        ("language", lambda i: langs[i]),
        ("position", lambda i: str(positions[i])),
        ("target", lambda i: tokens[i] if i in masked else ""),
    ]
    for i in range(len(tokens)):
        color = COLORS["bert"] if langs[i] == "en" else COLORS["student"]
        for r, (_name, text) in enumerate(rows):
            face = "#fde0dd" if (i in masked and r in (0, 3)) else ("white" if r else "#f2f2f2")
            ax.add_patch(plt.Rectangle((i, -r), 0.95, 0.9, facecolor=face, edgecolor=color, linewidth=1.2))
            ax.text(i + 0.47, -r + 0.45, text(i), ha="center", va="center", fontsize=7)
    for r, (name, _) in enumerate(rows):
        ax.text(-0.2, -r + 0.45, name, ha="right", va="center", fontsize=8, weight="bold")
    ax.set(xlim=(-1.6, len(tokens)), ylim=(-len(rows) + 0.8, 1.1))
    ax.axis("off")
    ax.set_title("TLM: one input holds a sentence and its translation (blue English, orange Italian)")
    hidden = ", ".join(tokens[i] for i in sorted(masked)) or "none"
    alt = (
        f"A table of {len(tokens)} input tokens: {' '.join(tokens)}. Language ids are en for the first "
        f"{len(english) + 2} and it for the rest; positions count from 0 in each sentence; the masked "
        f"tokens ({hidden}) are the targets, on either side."
    )
    return fig, alt


def _box(ax, x, y, w, h, text, color, fontsize=8):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", facecolor=color, alpha=0.25, edgecolor=color))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="#4d4d4d", **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=color, **kw))


def albert_layout(layers: int = 12, vocab: int = 30000, embedding: int = 128, hidden: int = 768):
    """BERT's embedding table and stack of distinct layers beside ALBERT's factorised table
    (V x E, then E x H) and one shared layer applied ``layers`` times. Returns ``(figure, alt)``."""
    for v, n in ((layers, "layers"), (vocab, "vocab"), (embedding, "embedding"), (hidden, "hidden")):
        _positive(v, n)
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    shown = min(layers, 6)
    for ax, title in ((a, "BERT"), (b, "ALBERT")):
        ax.set(xlim=(0, 10), ylim=(0, 10), title=title)
        ax.axis("off")
    _box(a, 0.5, 0.5, 4, 1.4, f"word table\n{vocab:,} x {hidden}\n{vocab * hidden / 1e6:.1f}M", COLORS["bert"])
    for i in range(shown):
        _box(
            a, 5.5, 0.5 + i * 1.5, 4, 1.2, f"layer {i + 1}" if i < shown - 1 else f"... layer {layers}", COLORS["bert"]
        )
    _arrow(a, (4.5, 1.2), (5.5, 1.1))
    factor = vocab * embedding + embedding * hidden
    _box(b, 0.5, 0.5, 4, 1.4, f"word table\n{vocab:,} x {embedding}", COLORS["albert"])
    _box(b, 0.5, 2.5, 4, 1.2, f"projection {embedding} x {hidden}\n(both: {factor / 1e6:.1f}M)", COLORS["albert"])
    _arrow(b, (2.5, 1.9), (2.5, 2.5))
    _box(b, 5.0, 3.5, 3.5, 1.6, "one shared layer", COLORS["albert"], fontsize=9)
    _arrow(b, (4.5, 3.1), (5.0, 4.0))
    # the loop back into the layer bulges to its right: the box leaves it room inside the axes
    b.add_patch(
        FancyArrowPatch(
            (8.5, 4.8),
            (8.5, 3.8),
            connectionstyle="arc3,rad=-1.6",
            arrowstyle="-|>",
            mutation_scale=10,
            color=COLORS["albert"],
        )
    )
    b.text(6.75, 6.2, f"applied {layers} times", ha="center", fontsize=8, color=COLORS["albert"])
    fig.suptitle("ALBERT: a factorised table and one layer reused (fewer weights, same work)")
    alt = (
        f"Left, BERT: a {vocab:,} by {hidden} word table feeding a stack of {layers} distinct layers. Right, "
        f"ALBERT: a {vocab:,} by {embedding} table and an {embedding} by {hidden} projection, together "
        f"{factor / 1e6:.1f}M parameters instead of {vocab * hidden / 1e6:.1f}M, feeding one layer whose "
        f"weights are applied {layers} times."
    )
    return fig, alt


def triple_loss(temperature: float = 2.0, weights=(5.0, 2.0, 1.0)):
    """DistilBERT's three losses: where each term reads from the teacher and the student, and its
    weight. Returns ``(figure, alt text)``."""
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if len(weights) != 3 or any(w < 0 for w in weights):
        raise ValueError(f"weights must be three non-negative numbers (ce, task, cos), got {weights!r}")
    ce, task, cos = weights
    fig, ax = plt.subplots(figsize=(9, 3.4))
    ax.set(xlim=(0, 12), ylim=(0, 8))
    ax.axis("off")
    _box(ax, 0.3, 5.2, 3, 1.6, "teacher\n(frozen, 2L layers)", COLORS["teacher"], fontsize=9)
    _box(ax, 0.3, 1.2, 3, 1.6, "student\n(L layers, one in two\nof the teacher's)", COLORS["student"], fontsize=9)
    _box(ax, 8.3, 6.0, 3.4, 1.3, f"L_ce x {ce:g}\nKL of softened outputs, T = {temperature:g}", COLORS["dynamic"])
    _box(ax, 8.3, 3.4, 3.4, 1.3, f"L_mlm x {task:g}\ncross-entropy, masked words", COLORS["static"])
    _box(ax, 8.3, 0.8, 3.4, 1.3, f"L_cos x {cos:g}\ncosine of hidden states", COLORS["albert"])
    _box(ax, 4.5, 3.4, 2.4, 1.3, "labels\n(masked words)", COLORS["neutral"])
    for start, end in (
        ((3.3, 6.3), (8.3, 6.8)),
        ((3.3, 2.3), (8.3, 6.3)),  # L_ce: both outputs
        ((3.3, 2.0), (8.3, 3.9)),
        ((6.9, 4.05), (8.3, 4.05)),  # L_mlm: student + the masked words
        ((3.3, 5.6), (8.3, 1.7)),
        ((3.3, 1.6), (8.3, 1.3)),
    ):  # L_cos: both hidden states
        _arrow(ax, start, end)
    ax.set_title(f"DistilBERT's triple loss: {ce:g} L_ce + {task:g} L_mlm + {cos:g} L_cos")
    alt = (
        f"The teacher and the student read the same text. The teacher's and the student's outputs, "
        f"softened at T = {temperature:g}, feed L_ce (weight {ce:g}); the student's output and the true "
        f"labels feed L_mlm (weight {task:g}); the two models' hidden states feed L_cos (weight {cos:g})."
    )
    return fig, alt


def _matrix(ax, x0, values, label, edge, face, gid):
    rows = len(values)
    for r, row in enumerate(values):
        for c, text in enumerate(row):
            ax.add_patch(plt.Rectangle((x0 + c, rows - 1 - r), 0.95, 0.9, facecolor=face, edgecolor=edge))
            ax.text(x0 + c + 0.47, rows - 1 - r + 0.45, text, ha="center", va="center", fontsize=7, gid=gid)
    ax.text(x0 + len(values[0]) / 2, rows + 0.25, label, ha="center", va="bottom", fontsize=8)


def quantization(rows: int = 4, cols: int = 6, seed: int = 0):
    """Dynamic int8 quantisation of one weight matrix, as ``quantize_dynamic`` does it for each
    ``nn.Linear``: one per-tensor symmetric scale, int8 codes, the rounding error; and what else in a
    BERT layer is converted or kept. Returns ``(figure, alt text)``."""
    for v, n in ((rows, "rows"), (cols, "cols")):
        if not isinstance(v, int) or not 1 <= v <= 8:
            raise ValueError(f"{n} must be an integer from 1 to 8 (a matrix small enough to print), got {v!r}")
    if not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    w = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))
    # torch's qint8 weight observer (per-tensor symmetric, zero point 0) maps max|w| to half the range
    # [-128, 127]: s = max|w| / ((127 - (-128)) / 2) = max|w| / 127.5
    top = w.abs().max().item()
    s = top / 127.5
    q = torch.clamp(torch.round(w / s), -128, 127)
    err = w - q * s
    worst = err.abs().max().item()
    n = rows * cols
    fig, ax = plt.subplots(figsize=(max(10.0, 1.35 * cols + 2), max(3.2, 1.5 + 0.45 * rows)))
    gap = 3
    _matrix(
        ax,
        0,
        [[f"{v:.2f}" for v in row] for row in w.tolist()],
        "w: float32, 4 bytes each",
        COLORS["bert"],
        "white",
        "float32",
    )
    _matrix(
        ax,
        cols + gap,
        [[f"{int(v)}" for v in row] for row in q.tolist()],
        "q: int8, 1 byte each",
        COLORS["int8"],
        "#eeeeee",
        "int8",
    )
    _matrix(
        ax,
        2 * (cols + gap),
        [[f"{1000 * v:+.1f}" for v in row] for row in err.tolist()],
        f"error w - q·s (× 0.001): max {1000 * worst:.1f}, s/2 = {500 * s:.1f}",
        COLORS["dynamic"],
        "white",
        "error",
    )
    for x, label in ((cols, "q = round(w / s)"), (2 * cols + gap, "w' = q·s")):
        _arrow(ax, (x + 0.2, rows / 2), (x + gap - 0.2, rows / 2))
        ax.text(x + gap / 2, rows / 2 + 0.25, label, ha="center", va="bottom", fontsize=8)
    width = 3 * cols + 2 * gap
    third = (width - 0.6) / 3
    for i, (text, color) in enumerate(
        (
            (
                "converts: nn.Linear weights (Q, K, V, output, FFN)\nto int8, 1 byte each + one fp32 scale per matrix",
                COLORS["int8"],
            ),
            ("keeps float32: embedding tables,\nLayerNorm, biases", COLORS["bert"]),
            ("quantises activations on the fly,\nat run time, at every call", COLORS["dynamic"]),
        )
    ):
        _box(ax, i * (third + 0.3), -2.4, third, 1.5, text, color, fontsize=7.5)
    ax.text(0, -0.45, "In a BERT model, quantize_dynamic:", fontsize=8, va="center", weight="bold")
    ax.set(xlim=(-0.2, width + 0.2), ylim=(-2.6, rows + 1))
    ax.axis("off")
    ax.set_title(
        f"Dynamic int8 quantisation of one weight matrix: s = max|w| / 127.5 = {top:.3f} / 127.5 "
        f"= {s:.5f}, zero point 0"
    )
    alt = (
        f"A {rows} by {cols} float32 weight matrix w (drawn with seed {seed}) is quantised to int8 with one "
        f"per-tensor symmetric scale s = max|w| / 127.5 = {top:.4f} / 127.5 = {s:.5f} and zero point 0: each "
        f"weight becomes q = round(w / s), an integer from -128 to 127, and q times s gives it back with a "
        f"largest rounding error of {worst:.5f} (at most s/2 = {s / 2:.5f}). Stored: {n} weights x 4 bytes = "
        f"{4 * n} bytes in float32, {n} x 1 byte + 4 bytes for the scale = {n + 4} bytes in int8. In a BERT "
        f"layer quantize_dynamic converts the nn.Linear weights this way; embedding tables, LayerNorm and "
        f"biases stay float32, and activations are quantised on the fly at run time."
    )
    return fig, alt


def _segmentations(segmentations) -> dict:
    if not isinstance(segmentations, dict) or not segmentations:
        raise ValueError(
            f"segmentations must be a non-empty dict language -> [(word, [pieces]), ...], got {segmentations!r}"
        )
    checked = {}
    for lang, words in segmentations.items():
        if not isinstance(lang, str) or not isinstance(words, (list, tuple)) or not words:
            raise ValueError(
                f"segmentations[{lang!r}] must be a non-empty list of (word, [pieces]) pairs, got {words!r}"
            )
        checked[lang] = []
        for pair in words:
            if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not isinstance(pair[0], str):
                raise ValueError(f"each entry of segmentations[{lang!r}] must be a (word, [pieces]) pair, got {pair!r}")
            word, pieces = pair
            if isinstance(pieces, str) or not isinstance(pieces, (list, tuple)) or not pieces:
                raise ValueError(
                    f"{lang} word {word!r} needs at least one piece (a list such as tok.tokenize(word)), got {pieces!r}"
                )
            bad = [p for p in pieces if not isinstance(p, str) or not p]
            if bad:
                raise ValueError(f"pieces must be non-empty strings; {lang} word {word!r} has {bad!r}")
            checked[lang].append((word, list(pieces)))
    return checked


def shared_vocabulary(segmentations, model: str | None = None):
    """One subword vocabulary for many languages: each word of each language and its pieces, the
    pieces that occur in two or more languages coloured as shared. ``segmentations`` maps a language to
    ``[(word, [pieces]), ...]`` (from any tokenizer). Returns ``(figure, alt text)``."""
    rows = _segmentations(segmentations)
    if model is not None and not isinstance(model, str):
        raise ValueError(f"model must be a name (a string) or None, got {model!r}")
    langs_of = {}
    for lang, words in rows.items():
        for _, pieces in words:
            for p in pieces:
                langs_of.setdefault(p, set()).add(lang)
    shared = [p for p, langs in langs_of.items() if len(langs) > 1]
    char, pad, gap = 0.7, 0.8, 0.25  # width of one character, margin in a piece, between pieces
    columns = max(len(words) for words in rows.values())  # the i-th word of every language in one column
    column = [0.0] * columns
    for words in rows.values():
        for i, (word, pieces) in enumerate(words):
            need = max(char * len(word), sum(char * len(p) + pad + gap for p in pieces))
            column[i] = max(column[i], need)
    starts = [sum(column[:i]) + 2.0 * i for i in range(columns)]
    width = starts[-1] + column[-1]
    layout = []
    for r, words in enumerate(rows.values()):
        y = -1.6 * r
        for i, (word, pieces) in enumerate(words):
            x = starts[i]
            layout.append((x, y + 1.0, word, None))  # the word above its pieces
            for p in pieces:
                layout.append((x, y, p, char * len(p) + pad))
                x += char * len(p) + pad + gap
    fig, ax = plt.subplots(figsize=(min(18, max(6, 0.1 * width + 1.5)), 0.9 * len(rows) + 1.2))
    for x, y, text, w in layout:
        if w is None:
            ax.text(x, y, text, ha="left", va="center", fontsize=8, style="italic")
        else:
            _box(ax, x, y, w, 0.7, text, COLORS["dynamic"] if text in shared else COLORS["int8"])
    for r, lang in enumerate(rows):
        ax.text(-0.6, -1.6 * r + 0.35, lang, ha="right", va="center", fontsize=9, weight="bold")
    ax.set(xlim=(-0.5 - char * max(len(lang) for lang in rows) - 0.6, width), ylim=(-1.6 * len(rows) + 1.3, 1.4))
    ax.axis("off")
    ax.legend(
        handles=[
            Patch(
                facecolor=COLORS["dynamic"], alpha=0.25, edgecolor=COLORS["dynamic"], label="piece used by 2+ languages"
            ),
            Patch(facecolor=COLORS["int8"], alpha=0.25, edgecolor=COLORS["int8"], label="piece used by one language"),
        ],
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=2,
        fontsize=8,
    )
    ax.set_title(f"One subword vocabulary for every language{f' ({model})' if model else ''}", pad=22)
    which = "; ".join(f"{p} ({', '.join(sorted(langs_of[p]))})" for p in shared)
    alt = (
        f"One row per language ({', '.join(rows)}), each word followed by its subword pieces"
        f"{f' from {model}' if model else ''}. {len(langs_of)} distinct piece{'s' * (len(langs_of) != 1)}, "
        f"{len(shared)} of them "
        f"shared by 2 or more languages{f': {which}' if shared else ''}; the others are used by one language "
        f"only."
    )
    return fig, alt
