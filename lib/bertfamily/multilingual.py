"""One vocabulary for every language: vocabulary growth, shared subword pieces, cross-lingual transfer.

Everything here takes plain lists of strings, a tokenizer (anything with ``.tokenize(text)`` or a
``tokenizers.Tokenizer``) and tensors, and returns plain values. The lesson is
``book/05_multilingual.ipynb``.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter, OrderedDict
from typing import Callable, Mapping, Sequence

import torch

from . import data
from .heads import fit_full_batch

__all__ = ["LANGUAGE_NAMES", "TOPIC_ALIASES", "words", "vocabulary_growth", "train_wordpiece",
           "tokenize_fn", "token_stats", "pieces_by_language", "shared_share", "pair_sharing",
           "labelled_prompts", "chatterbot_sentences", "restrict_to", "embed_sorted", "majority_baseline",
           "train_probe",
           "accuracy", "transfer_table", "mix_languages", "labelled_halves", "transfer_evaluation",
           "equal_sample_sharing"]

LANGUAGE_NAMES = OrderedDict(en="English", es="Spanish", it="Italian", de="German", fr="French",
                             uk="Ukrainian")

# chatterbot's Spanish files have Spanish names; everything else is named as in English.
TOPIC_ALIASES = {"IA": "ai", "dinero": "money", "emociones": "emotion", "perfilbot": "botprofile",
                 "origen": "botprofile", "psicologia": "psychology"}

_WORD = re.compile(r"\w+", re.UNICODE)


def _texts(texts, name="texts") -> list[str]:
    if isinstance(texts, str):
        raise ValueError(f"{name} must be a list of strings, not one string")
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise ValueError(f"{name} is empty: give at least one non-blank string")
    return texts


def _language(lang: str) -> str:
    if lang not in data.LANGUAGES:
        raise ValueError(f"unknown language code {lang!r}; known: {', '.join(sorted(data.LANGUAGES))}")
    return lang


def words(text: str) -> list[str]:
    """The words of ``text``: maximal runs of letters and digits (any script), case kept."""
    return _WORD.findall(text)


def vocabulary_growth(texts: Sequence[str], lowercase: bool = True):
    """Running counts over the words of ``texts`` read in order: ``(words_read, distinct_words)``,
    two int tensors with one entry per word read (Heaps' law curve)."""
    seen, read, distinct = set(), [], []
    n = 0
    for text in _texts(texts):
        for w in words(text.lower() if lowercase else text):
            n += 1
            seen.add(w)
            read.append(n)
            distinct.append(len(seen))
    if not read:
        raise ValueError("texts contain no words")
    return torch.tensor(read), torch.tensor(distinct)


def train_wordpiece(texts: Sequence[str], vocab_size: int = 4000, lowercase: bool = False,
                    min_frequency: int = 2):
    """Train a WordPiece vocabulary (BERT's scheme, ``##`` continuation pieces) on ``texts`` with
    Hugging Face ``tokenizers``; returns the ``tokenizers.Tokenizer``. Deterministic for the same input."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    texts = _texts(texts)
    if not isinstance(vocab_size, int) or vocab_size < 10:
        raise ValueError(f"vocab_size must be an integer >= 10, got {vocab_size!r}")
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=False,
                                                clean_text=True, handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def tokenize_fn(tokenizer) -> Callable[[str], list[str]]:
    """A function text -> list of pieces, for a ``tokenizers.Tokenizer`` or a transformers tokenizer."""
    if hasattr(tokenizer, "tokenize"):
        return tokenizer.tokenize
    if hasattr(tokenizer, "encode"):
        return lambda text: tokenizer.encode(text, add_special_tokens=False).tokens
    raise ValueError("tokenizer must have .tokenize(text) (transformers) or .encode(text) (tokenizers)")


def _unk(tokenizer) -> str | None:
    token = getattr(tokenizer, "unk_token", None)
    if token is None and hasattr(tokenizer, "get_vocab"):
        token = "[UNK]" if "[UNK]" in tokenizer.get_vocab() else None
    return token


def token_stats(tokenizer, texts: Sequence[str]) -> dict:
    """Pieces per word, unknown-piece rate and counts for ``texts`` under ``tokenizer``."""
    texts = _texts(texts)
    tokenize, unk = tokenize_fn(tokenizer), _unk(tokenizer)
    n_words = sum(len(words(t)) for t in texts)
    pieces = [p for t in texts for p in tokenize(t)]
    if not n_words or not pieces:
        raise ValueError("texts contain no words")
    n_unk = sum(p == unk for p in pieces) if unk is not None else 0
    return {"words": n_words, "pieces": len(pieces), "pieces_per_word": len(pieces) / n_words,
            "unknown": n_unk, "unknown_rate": n_unk / len(pieces)}


_PUNCT = re.compile(r"^(?:##|\u2581)?[\W_]*$", re.UNICODE)


def pieces_by_language(tokenizer, texts_by_language: Mapping[str, Sequence[str]],
                       drop_punctuation: bool = True) -> dict[str, set]:
    """The set of vocabulary pieces each language's texts use (punctuation-only pieces dropped)."""
    if not texts_by_language:
        raise ValueError("texts_by_language is empty: give {language code: list of texts}")
    tokenize = tokenize_fn(tokenizer)
    out = {}
    for lang, texts in texts_by_language.items():
        used = {p for t in _texts(texts, f"texts for {lang!r}") for p in tokenize(t)}
        out[lang] = {p for p in used if not (drop_punctuation and _PUNCT.match(p))}
    return out


def shared_share(pieces: Mapping[str, set]) -> float:
    """Fraction of the pieces used by any language that are used by more than one."""
    if len(pieces) < 2:
        raise ValueError("need pieces for at least two languages")
    counts = Counter(p for used in pieces.values() for p in used)
    if not counts:
        raise ValueError("no pieces used")
    return sum(c > 1 for c in counts.values()) / len(counts)


def pair_sharing(pieces: Mapping[str, set]) -> tuple[list[str], torch.Tensor]:
    """Jaccard overlap |A & B| / |A | B| of the pieces used by every pair of languages:
    ``(languages, matrix)`` with 1 on the diagonal."""
    if len(pieces) < 2:
        raise ValueError("need pieces for at least two languages")
    langs = list(pieces)
    m = torch.eye(len(langs), dtype=torch.float64)
    for (i, a), (j, b) in itertools.combinations(enumerate(langs), 2):
        union = pieces[a] | pieces[b]
        m[i, j] = m[j, i] = len(pieces[a] & pieces[b]) / len(union) if union else 0.0
    return langs, m


# ---------------------------------------------------------------------------------------------
# Cross-lingual transfer
# ---------------------------------------------------------------------------------------------
def labelled_prompts(lang: str) -> tuple[list[str], list[str]]:
    """chatterbot prompts of ``lang`` with topics in English names (Spanish files are renamed)."""
    texts, topics = data.chatterbot_prompts(_language(lang))
    return texts, [TOPIC_ALIASES.get(t, t) for t in topics]


def chatterbot_sentences(lang: str) -> list[str]:
    """Every distinct statement (prompts and answers) of the chatterbot corpus in ``lang``."""
    seen = {}
    for path in sorted(data._chatterbot_dir(_language(lang)).glob("*.yml")):
        for conv in data._conversations(path):
            for s in conv:
                if s:
                    seen.setdefault(s, None)
    return list(seen)


def restrict_to(texts, topics, keep) -> tuple[list[str], list[str]]:
    """Only the (text, topic) pairs whose topic is in ``keep``."""
    if len(texts) != len(topics):
        raise ValueError(f"{len(texts)} texts but {len(topics)} topics")
    keep = set(keep)
    rows = [(x, y) for x, y in zip(texts, topics) if y in keep]
    if not rows:
        raise ValueError(f"no text has a topic in {sorted(keep)}")
    return [x for x, _ in rows], [y for _, y in rows]


def embed_sorted(model, tokenizer, texts, prefix: str = "query: ", batch_size: int = 32,
                 max_length: int = 48) -> torch.Tensor:
    """e5 sentence embeddings, computed in length-sorted batches (less padding, less time and memory)
    and returned in the order of ``texts``."""
    from .e5 import embed

    texts = list(_texts(texts))
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    rows = embed(model, tokenizer, [texts[i] for i in order], prefix=prefix, batch_size=batch_size,
                 max_length=max_length)
    out = torch.empty_like(rows)
    out[torch.tensor(order)] = rows
    return out


def majority_baseline(labels: Sequence[str]) -> float:
    """Accuracy of always answering the most frequent label of ``labels`` (the best constant guess)."""
    if not len(labels):
        raise ValueError("labels is empty")
    return Counter(labels).most_common(1)[0][1] / len(labels)


class _Standardise(torch.nn.Module):
    def __init__(self, x: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", x.mean(0))
        self.register_buffer("std", x.std(0).clamp(min=1e-6) if len(x) > 1 else torch.ones(x.shape[1]))

    def forward(self, x):
        return (x - self.mean) / self.std


def train_probe(features: torch.Tensor, labels: Sequence[str], classes: Sequence[str] | None = None,
                hidden: int = 0, epochs: int = 100, lr: float = 0.01, weight_decay: float = 1e-2,
                seed: int = 0, standardise: bool = True):
    """Fit a classifier on frozen sentence embeddings, full batch with Adam.

    ``hidden=0`` is a linear probe (multinomial logistic regression, zero-initialised, so the seed does
    not matter); ``hidden>0`` a one-hidden-layer head whose initialisation comes from ``seed``.
    With ``standardise`` the features are first centred and scaled by the *training* rows' mean and
    standard deviation (a fixed layer of the returned model, applied unchanged to any test language).
    Returns ``(model, classes)``; predict with :func:`accuracy`.
    """
    if features.ndim != 2 or features.shape[0] != len(labels):
        raise ValueError(f"features must be (n, d) with n = len(labels) = {len(labels)}, "
                         f"got {tuple(features.shape)}")
    classes = sorted(set(labels)) if classes is None else list(classes)
    if len(classes) < 2:
        raise ValueError("need at least two classes")
    index = {c: i for i, c in enumerate(classes)}
    if any(y not in index for y in labels):
        raise ValueError("a label is not in classes")
    y = torch.tensor([index[c] for c in labels])
    g = torch.Generator().manual_seed(seed)
    x = features.detach().float()
    d, k = x.shape[1], len(classes)
    scale = _Standardise(x) if standardise else torch.nn.Identity()
    if hidden:
        first, last = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, k)
        for layer in (first, last):
            bound = layer.in_features ** -0.5
            with torch.no_grad():
                layer.weight.uniform_(-bound, bound, generator=g)
                layer.bias.zero_()
        model = torch.nn.Sequential(first, torch.nn.GELU(), last)
    else:
        model = torch.nn.Linear(d, k)
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model = torch.nn.Sequential(scale, model)
    fit_full_batch(model, x, y, opt, epochs)  # the loop of distillation.train_linear_head
    model.eval()
    return model, classes


def accuracy(model, classes, features: torch.Tensor, labels: Sequence[str]) -> float:
    """Accuracy of a probe from :func:`train_probe` on ``features`` / ``labels``."""
    if features.shape[0] != len(labels) or not len(labels):
        raise ValueError(f"need one (non-empty) label per row: {features.shape[0]} rows, {len(labels)} labels")
    with torch.no_grad():
        pred = model(features.float()).argmax(-1).tolist()
    return sum(classes[p] == y for p, y in zip(pred, labels)) / len(labels)


def transfer_table(train_x, train_y, targets: Mapping[str, tuple], hidden: int = 0,
                   seeds: Sequence[int] = (0,), **probe_kwargs) -> dict:
    """Zero-shot transfer: for each target language, train on the English rows whose topic occurs in
    that language, test on the target rows. ``targets`` maps code -> (features, topics).

    Returns ``{code: {"n", "topics", "majority", "accuracy": [one per seed]}}``.
    """
    if not targets:
        raise ValueError("targets is empty: give {language code: (features, topics)}")
    out = {}
    for lang, (x, y) in targets.items():
        keep = sorted(set(y) & set(train_y))
        if len(keep) < 2:
            raise ValueError(f"{lang}: fewer than two topics shared with the training labels")
        rows = [i for i, t in enumerate(train_y) if t in keep]
        test = [i for i, t in enumerate(y) if t in keep]
        xs, ys = train_x[rows], [train_y[i] for i in rows]
        xt, yt = x[test], [y[i] for i in test]
        accs = []
        for seed in seeds:
            model, classes = train_probe(xs, ys, keep, hidden=hidden, seed=seed, **probe_kwargs)
            accs.append(accuracy(model, classes, xt, yt))
        out[lang] = {"n": len(test), "train": len(rows), "topics": len(keep),
                     "majority": majority_baseline(yt), "accuracy": accs}
    return out


def mix_languages(first: str, second: str, cut: float = 0.5) -> str:
    """A code-switched sentence: the first ``cut`` of ``first``'s words, then the rest of ``second``'s
    (for two translations of one sentence)."""
    if not 0 < cut < 1:
        raise ValueError(f"cut must be in (0, 1), got {cut}")
    a, b = first.split(), second.split()
    if not a or not b:
        raise ValueError("both sentences must have words")
    return " ".join(a[:max(1, round(cut * len(a)))] + b[max(1, round(cut * len(b))):])


# Transfer without leakage: split by position in the topic file
# ---------------------------------------------------------------------------------------------
def labelled_halves(lang: str) -> list[int]:
    """0 or 1 for each prompt of :func:`labelled_prompts`: the first or second half of its topic
    file. A translated file keeps the English order, so a prompt and its translation share a half."""
    return [int(p >= 0.5) for p in data.chatterbot_positions(_language(lang))]


def _predict(model, classes, x) -> list[str]:
    with torch.no_grad():
        return [classes[i] for i in model(x.float()).argmax(-1).tolist()]


def _cross_fit(train, test, classes, same: bool = False, **probe_kwargs) -> torch.Tensor:
    """Per test row, 1.0 if a probe trained on ``train``'s *other* half (``same``: the same half)
    labels it right."""
    (tx, ty, th), (x, y, h) = train, test
    correct = torch.zeros(len(y))
    for half in (0, 1):
        rows = [i for i, v in enumerate(th) if (v == half) == same and ty[i] in classes]
        tests = [i for i, v in enumerate(h) if v == half]
        if not tests:
            continue
        if len({ty[i] for i in rows}) < 2:
            raise ValueError("a training half has fewer than two topics; the split is too small")
        model, cls = train_probe(tx[rows], [ty[i] for i in rows], classes, **probe_kwargs)
        pred = _predict(model, cls, x[tests])
        correct[tests] = torch.tensor([float(p == y[i]) for p, i in zip(pred, tests)])
    return correct


def transfer_evaluation(english: tuple, target: tuple, **probe_kwargs) -> dict:
    """Zero-shot transfer measured without leakage, next to the in-language ceiling.

    ``english`` and ``target`` are ``(features, topics, halves)`` (halves from :func:`labelled_halves`).
    Both arms are cross-fitted over the two halves of every topic file: the English-trained probe
    never trains on the half whose translations it is tested on, and the in-language probe is trained
    on the target's other half. Both therefore score the *same* target rows, so their difference is a
    paired comparison. Only topics the target language has are used.

    Returns ``{"n", "topics", "majority", "zero_shot", "in_language", "leaky"}``: the last three are
    0/1 tensors, one value per target row. ``leaky`` is the control: the English probe trained on the
    *same* half as its test rows (as many training rows, but now holding the test prompts'
    translations), so ``leaky - zero_shot`` is what leakage adds.
    """
    (ex, ey, eh), (x, y, h) = english, target
    for name, (f, t, hv) in (("english", english), ("target", target)):
        if not (f.shape[0] == len(t) == len(hv)):
            raise ValueError(f"{name}: features, topics and halves need one row each: "
                             f"{f.shape[0]}, {len(t)}, {len(hv)}")
        if set(hv) - {0, 1}:
            raise ValueError(f"{name}: halves must be 0 or 1 (see labelled_halves)")
    classes = sorted(set(y) & set(ey))
    if len(classes) < 2:
        raise ValueError("fewer than two topics shared by the English and the target rows")
    rows = [i for i, t in enumerate(y) if t in classes]
    x, y, h = x[rows], [y[i] for i in rows], [h[i] for i in rows]
    zero_shot = _cross_fit((ex, ey, eh), (x, y, h), classes, **probe_kwargs)
    in_language = _cross_fit((x, y, h), (x, y, h), classes, **probe_kwargs)
    leaky = _cross_fit((ex, ey, eh), (x, y, h), classes, same=True, **probe_kwargs)
    return {"n": len(y), "topics": len(classes), "majority": majority_baseline(y),
            "zero_shot": zero_shot, "in_language": in_language, "leaky": leaky}


def equal_sample_sharing(tokenizer, sentences: Mapping[str, Sequence[str]], n: int | None = None,
                         draws: int = 20, seed: int = 0) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """:func:`pair_sharing` on ``n`` sentences per language (default: the smallest language's count),
    redrawn ``draws`` times, so a language with more text does not share more pieces just because it
    uses more. Returns ``(languages, mean Jaccard matrix, its standard deviation over draws)``."""
    import random

    smallest = min(len(v) for v in sentences.values())
    n = smallest if n is None else n
    if not isinstance(n, int) or not 1 <= n <= smallest:
        raise ValueError(f"n must be an integer from 1 to {smallest} (the smallest language), got {n!r}")
    if not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    rng = random.Random(seed)
    mats = []
    for _ in range(draws):
        sample = {lang: rng.sample(list(v), n) for lang, v in sentences.items()}
        langs, m = pair_sharing(pieces_by_language(tokenizer, sample))
        mats.append(m)
    stacked = torch.stack(mats)
    return langs, stacked.mean(0), stacked.std(0) if draws > 1 else torch.zeros_like(mats[0])
