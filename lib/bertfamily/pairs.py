"""The parallel pairs of the XLM lesson as token ids: a small vocabulary for both languages, held-out
pairs, and MLM's one-sentence input (:mod:`bertfamily.tlm` re-exports every name).

* :func:`train_tokenizer`: a small WordPiece vocabulary learned from the training sentences of both
  languages (one vocabulary for the two, as in XLM), so the model stays tiny; its special tokens
  have the ids :data:`PAD`, :data:`UNK`, :data:`CLS`, :data:`SEP`, :data:`MASK`.
* :func:`split_pairs`: held-out pairs that share no sentence with the training pairs.
* :func:`encode_pairs` and :func:`keep_short`: the ids of each side, without the few paragraph-long
  pairs that would pad every batch.
* :func:`monolingual_inputs`: the MLM baseline's input, each sentence alone with its language id
  (TLM's pair input is :func:`bertfamily.masking.tlm_inputs`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, UNK, CLS, SEP, MASK = range(5)

__all__ = [
    "SPECIAL_TOKENS",
    "PAD",
    "UNK",
    "CLS",
    "SEP",
    "MASK",
    "train_tokenizer",
    "split_pairs",
    "encode_pairs",
    "keep_short",
    "monolingual_inputs",
]


def train_tokenizer(texts: Sequence[str], vocab_size: int = 1000, max_piece: int = 12):
    """A lower-cased WordPiece tokenizer (``tokenizers``) whose vocabulary is learned from ``texts``.

    The vocabulary is chosen deterministically (the ``tokenizers`` WordPiece trainer breaks ties
    differently from run to run, and a lesson's numbers must not move): the five special tokens
    (ids 0-4 in the order of :data:`SPECIAL_TOKENS`), every character seen, as a word start and as a
    ``##`` continuation, then the word-initial pieces and ``##`` pieces of up to ``max_piece``
    characters that save the most characters over the corpus (count x (length - 1)), ties broken
    alphabetically. Words are split as BERT splits them (lower case, accents kept, punctuation apart)
    and tokenised greedily, longest piece first, as in BERT.
    """
    from collections import Counter

    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise ValueError("texts is empty: give the training sentences to learn the vocabulary from")
    if not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size must be an integer above {len(SPECIAL_TOKENS)} (the special tokens), got {vocab_size!r}"
        )
    normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=False)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = Counter(w for t in texts for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(t)))
    alphabet = sorted({ch for w in words for ch in w})
    pieces = [*SPECIAL_TOKENS, *alphabet, *(f"##{ch}" for ch in alphabet)]
    if len(pieces) > vocab_size:
        raise ValueError(
            f"vocab_size {vocab_size} is below the {len(pieces)} special tokens and characters of these texts"
        )
    saving = Counter()
    for word, count in words.items():
        for i in range(len(word)):
            for j in range(i + 2, min(len(word), i + max_piece) + 1):
                saving[word[i:j] if i == 0 else f"##{word[i:j]}"] += count * (j - i - 1)
    pieces += sorted(saving, key=lambda p: (-saving[p], p))[: vocab_size - len(pieces)]
    tokenizer = Tokenizer(
        models.WordPiece({p: i for i, p in enumerate(pieces)}, unk_token="[UNK]", max_input_chars_per_word=100)
    )
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


def split_pairs(pairs: Sequence[tuple[str, str]], test_fraction: float = 0.2, seed: int = 0):
    """``(train, test)`` lists of pairs such that no test sentence, on either side, is in train.

    Pairs are grouped by their first sentence (the corpus repeats some prompts with different
    translations); a share ``test_fraction`` of the groups is held out, and held-out pairs whose
    second sentence also occurs in training are dropped. Deterministic for a given ``seed``.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    pairs = [tuple(p) for p in pairs]
    if len(pairs) < 2 or any(len(p) != 2 or not all(isinstance(s, str) and s for s in p) for p in pairs):
        raise ValueError("pairs must be at least two (first, second) pairs of non-empty strings")
    firsts = sorted({a for a, _ in pairs})
    random.Random(seed).shuffle(firsts)
    held = set(firsts[: max(1, round(test_fraction * len(firsts)))])
    train = [p for p in pairs if p[0] not in held]
    seen_second = {b for _, b in train}
    test = [p for p in pairs if p[0] in held and p[1] not in seen_second]
    return train, test


def encode_pairs(tokenizer, pairs) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of each side of ``pairs``, without special tokens: ``(first_ids, second_ids)``."""
    first = [e.ids for e in tokenizer.encode_batch([a for a, _ in pairs], add_special_tokens=False)]
    second = [e.ids for e in tokenizer.encode_batch([b for _, b in pairs], add_special_tokens=False)]
    return first, second


def keep_short(first, second, max_tokens: int = 48):
    """The pairs whose two sides hold at most ``max_tokens`` tokens together, as ``(first, second)``.

    A few chatterbot answers run to a paragraph; one of them in a batch pads every row to its
    length, so dropping them makes a training step several times cheaper.
    """
    if not isinstance(max_tokens, int) or max_tokens < 2:
        raise ValueError(f"max_tokens must be an integer >= 2 (a token on each side), got {max_tokens!r}")
    if len(first) != len(second):
        raise ValueError(f"first and second must hold the same number of sentences, got {len(first)} and {len(second)}")
    kept = [(a, b) for a, b in zip(first, second, strict=True) if a and b and len(a) + len(b) <= max_tokens]
    if not kept:
        raise ValueError(f"no pair has at most {max_tokens} tokens: raise max_tokens")
    return [a for a, _ in kept], [b for _, b in kept]


def monolingual_inputs(
    sentences, language_ids, *, cls_id: int = CLS, sep_id: int = SEP, pad_id: int = PAD
) -> dict[str, torch.Tensor]:
    """MLM's input: each sentence alone as ``[CLS] s [SEP]``, with its own language id.

    Returns the same keys as :func:`~bertfamily.masking.tlm_inputs` (``input_ids``,
    ``attention_mask``, ``language_ids``, ``position_ids``, ``special_mask``), so the two objectives
    feed the model the same way.
    """
    rows = [list(map(int, s)) for s in sentences]
    language_ids = [int(l) for l in language_ids]
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("sentences must be a non-empty list of non-empty lists of token ids")
    if len(language_ids) != len(rows):
        raise ValueError(f"need one language id per sentence, got {len(language_ids)} for {len(rows)}")
    length = max(len(r) for r in rows) + 2
    n = len(rows)
    out = {
        "input_ids": torch.full((n, length), pad_id, dtype=torch.long),
        "attention_mask": torch.zeros((n, length), dtype=torch.long),
        "language_ids": torch.zeros((n, length), dtype=torch.long),
        "position_ids": torch.zeros((n, length), dtype=torch.long),
        "special_mask": torch.ones((n, length), dtype=torch.bool),
    }
    for i, (row, lang) in enumerate(zip(rows, language_ids, strict=True)):
        k = len(row) + 2
        out["input_ids"][i, :k] = torch.tensor([cls_id, *row, sep_id])
        out["attention_mask"][i, :k] = 1
        out["language_ids"][i, :] = lang
        out["position_ids"][i, :k] = torch.arange(k)
        out["special_mask"][i, 1 : k - 1] = False
    return out
