"""Parallel English–Italian sentences built so that a hidden Italian word is recoverable only from English.

Each pair says the same thing in both languages: ``the red cat sees the old dog .`` and
``il gatto rosso vede il cane vecchio .``. The words are drawn at random, so the Italian context
alone says only which *kind* of word is missing (a noun, an adjective or a verb), not which one;
the English sentence says exactly which. The word order differs (Italian puts the adjective after
the noun), so a model cannot copy by position alone: it has to align. XLM's translation language
modelling was trained on millions of real pairs; at the course's scale this data gives the
mechanism something to find (the lesson also shows why the few hundred real pairs do not).

Gender agreement is left out on purpose (``il`` and masculine forms throughout): it would let the
Italian context give away part of the answer.
"""

from __future__ import annotations

import random

NOUNS = (
    ("cat", "gatto"),
    ("dog", "cane"),
    ("horse", "cavallo"),
    ("bird", "uccello"),
    ("fish", "pesce"),
    ("wolf", "lupo"),
    ("bear", "orso"),
    ("mouse", "topo"),
    ("lion", "leone"),
    ("rabbit", "coniglio"),
    ("goat", "capro"),
    ("bull", "toro"),
    ("duck", "papero"),
    ("frog", "rospo"),
    ("pig", "maiale"),
    ("fox", "volpe"),
    ("boy", "ragazzo"),
    ("man", "uomo"),
    ("king", "re"),
    ("friend", "amico"),
    ("doctor", "medico"),
    ("farmer", "contadino"),
    ("baker", "fornaio"),
    ("soldier", "soldato"),
)
ADJECTIVES = (
    ("red", "rosso"),
    ("black", "nero"),
    ("white", "bianco"),
    ("big", "grande"),
    ("small", "piccolo"),
    ("old", "vecchio"),
    ("young", "giovane"),
    ("happy", "felice"),
    ("sad", "triste"),
    ("tired", "stanco"),
    ("hungry", "affamato"),
    ("brave", "coraggioso"),
)
VERBS = (
    ("sees", "vede"),
    ("follows", "segue"),
    ("helps", "aiuta"),
    ("finds", "trova"),
    ("calls", "chiama"),
    ("loves", "ama"),
    ("watches", "guarda"),
    ("knows", "conosce"),
)
#: Every word pair, English first.
WORDS = NOUNS + ADJECTIVES + VERBS


def lexicon_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` distinct (English, Italian) sentence pairs, sorted, the same for the same ``seed``."""
    possible = (len(ADJECTIVES) * len(NOUNS)) ** 2 * len(VERBS)
    if not isinstance(n, int) or not 1 <= n <= possible // 2:
        raise ValueError(f"n must be an integer from 1 to {possible // 2}, got {n!r}")
    draw, out = random.Random(seed), set()
    while len(out) < n:
        (a1, b1), (n1, m1), (v, w), (a2, b2), (n2, m2) = (
            draw.choice(ADJECTIVES),
            draw.choice(NOUNS),
            draw.choice(VERBS),
            draw.choice(ADJECTIVES),
            draw.choice(NOUNS),
        )
        out.add((f"the {a1} {n1} {v} the {a2} {n2} .", f"il {m1} {b1} {w} il {m2} {b2} ."))
    return sorted(out)


def translations(tokenizer) -> dict[int, int]:
    """Italian token id -> English token id of its translation, for every word of the lexicon
    (each must be a single token of ``tokenizer``: a ValueError names any that is not)."""
    out, split = {}, []
    for english, italian in WORDS:
        ids = [tokenizer.encode(w, add_special_tokens=False).ids for w in (english, italian)]
        if any(len(i) != 1 for i in ids):
            split.append(f"{english}/{italian}")
            continue
        out[ids[1][0]] = ids[0][0]
    if split:
        raise ValueError(
            f"these words are not single tokens of the tokenizer: {', '.join(split)}; "
            "train it on the lexicon's sentences with a larger vocabulary"
        )
    return out
