"""One vocabulary for every language: vocabulary growth, shared subword pieces, cross-lingual transfer.

Everything here takes plain lists of strings, a tokenizer (anything with ``.tokenize(text)`` or a
``tokenizers.Tokenizer``) and tensors, and returns plain values. The lesson is
``book/05_multilingual.ipynb``.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence

import torch

from . import data

__all__ = ["LANGUAGE_NAMES", "TOPIC_ALIASES", "words", "vocabulary_growth", "train_wordpiece",
           "tokenize_fn", "token_stats", "pieces_by_language", "shared_share", "pair_sharing",
           "labelled_prompts", "chatterbot_sentences", "restrict_to", "mix_languages",
           "labelled_halves", "equal_sample_sharing"]

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


def train_wordpiece(texts: Sequence[str], vocab_size: int = 4000,
                    lowercase: bool = False, min_frequency: int = 2):
    """Train a WordPiece vocabulary (BERT's scheme, ``##`` continuation pieces) on ``texts`` with
    Hugging Face ``tokenizers``; returns the ``tokenizers.Tokenizer``. Deterministic for the same input.

    Lesson 5 shows this function's code, so its lines fit the book's output column (75 characters)."""
    import tokenizers as tk
    from tokenizers.decoders import WordPiece as WordPieceDecoder
    from tokenizers.pre_tokenizers import BertPreTokenizer

    texts = _texts(texts)
    if not isinstance(vocab_size, int) or vocab_size < 10:
        raise ValueError(f"vocab_size must be an integer >= 10, "
                         f"got {vocab_size!r}")
    norm = tk.normalizers.BertNormalizer(
        lowercase=lowercase, strip_accents=False, clean_text=True,
        handle_chinese_chars=True)
    pre = BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # The trainer numbers the "##" pieces in hash order, which changes
    # from run to run, and breaks ties between equally frequent pairs by
    # number: numbered first, in a fixed order, the vocabulary is the same
    # every run.
    words = [w for t in texts
             for w, _ in pre.pre_tokenize_str(norm.normalize_str(t))]
    inner = sorted({f"##{c}" for w in words for c in w[1:]})
    tok = tk.Tokenizer(tk.models.WordPiece(unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = norm, pre
    trainer = tk.trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency,
        special_tokens=special + inner, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    # a WordPiece model of that vocabulary: "##" pieces are not special
    vocab = tok.get_vocab()
    tok = tk.Tokenizer(tk.models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = norm, pre
    tok.decoder = WordPieceDecoder()
    tok.add_special_tokens(
        [tk.AddedToken(t, special=True) for t in special])
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
    for path in sorted(data.chatterbot_dir(_language(lang)).glob("*.yml")):
        for conv in data.conversations(path):
            for s in conv:
                if s:
                    seen.setdefault(s, None)
    return list(seen)


# Nothing in the course calls it since issue 20; kept because lesson 5's notebooks up to ebf0b29 did.
def restrict_to(texts, topics, keep) -> tuple[list[str], list[str]]:
    """Only the (text, topic) pairs whose topic is in ``keep``."""
    if len(texts) != len(topics):
        raise ValueError(f"{len(texts)} texts but {len(topics)} topics")
    keep = set(keep)
    rows = [(x, y) for x, y in zip(texts, topics, strict=True) if y in keep]
    if not rows:
        raise ValueError(f"no text has a topic in {sorted(keep)}")
    return [x for x, _ in rows], [y for _, y in rows]


def mix_languages(first: str, second: str, cut: float = 0.5) -> str:
    """A code-switched sentence: the first ``cut`` of ``first``'s words, then the rest of ``second``'s
    (for two translations of one sentence)."""
    if not 0 < cut < 1:
        raise ValueError(f"cut must be in (0, 1), got {cut}")
    a, b = first.split(), second.split()
    if not a or not b:
        raise ValueError("both sentences must have words")
    return " ".join(a[:max(1, round(cut * len(a)))] + b[max(1, round(cut * len(b))):])


# The halves of a leakage-free split (bertfamily.transfer), and sharing on equal samples
# ---------------------------------------------------------------------------------------------
def labelled_halves(lang: str) -> list[int]:
    """0 or 1 for each prompt of :func:`labelled_prompts`: the first or second half of its topic
    file. A translated file keeps the English order, so a prompt and its translation share a half."""
    return [int(p >= 0.5) for p in data.chatterbot_positions(_language(lang))]


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
