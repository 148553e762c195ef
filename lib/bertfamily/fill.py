"""A masked-language model filling in blanks, shown word by word.

* :func:`pick_blanks` chooses the blanks to show by a rule fixed in code (not by looking at the
  guesses): in every ``every``-th held-out block, the first position the held-out mask turned into
  ``[MASK]`` whose hidden piece is a whole word of at least ``min_letters`` letters.
* :func:`top_guesses` is a model's ``k`` most probable pieces for one blank, with probabilities.
* :func:`context` is the text around a blank, the blank drawn as ``____``.
* :func:`window` re-cuts a blank's block to a shorter model's length (the blank kept inside).
"""

from __future__ import annotations

import torch

from .masking import IGNORE_INDEX

__all__ = [
    "pick_blanks",
    "whole_word_blanks",
    "top_guesses",
    "context",
    "window",
    "showcase_blanks",
    "random_blanks",
    "guesses_at",
    "guess",
    "piece",
    "wrap",
]


def pick_blanks(held_out, words, tokenizer, *, count: int = 6, every: int = 97, min_letters: int = 4) -> list:
    """``(block, position)`` of the blanks to show (see the module's rule), at most ``count`` of them.

    ``held_out`` is a :class:`~bertfamily.pretraining.HeldOut` in compact ids and ``words`` its
    :class:`~bertfamily.pretraining.CompactVocabulary`; ``tokenizer`` names the pieces.
    """
    if not isinstance(count, int) or count < 1 or not isinstance(every, int) or every < 1:
        raise ValueError(f"count and every must be positive integers, got {count!r} and {every!r}")
    mask_id = words(tokenizer.mask_token_id)
    chosen = []
    for block in range(0, held_out.input_ids.shape[0], every):
        ids, labels = held_out.input_ids[block], held_out.labels[block]
        for position in range(1, ids.shape[0] - 1):
            if labels[position] == IGNORE_INDEX or ids[position] != mask_id:
                continue
            if _whole_word(ids, labels, position, words, tokenizer, min_letters):
                chosen.append((block, position))
                break
        if len(chosen) == count:
            break
    return chosen


def _whole_word(ids, labels, position: int, words, tokenizer, min_letters: int) -> bool:
    """True when the blank at ``position`` hides a whole word (not a piece of one) of ``min_letters`` or more."""
    piece = tokenizer.convert_ids_to_tokens(int(words.decode(labels[position])))
    if position + 1 >= ids.shape[0]:
        return False
    after = labels[position + 1] if labels[position + 1] != IGNORE_INDEX else ids[position + 1]
    following = tokenizer.convert_ids_to_tokens(int(words.decode(after)))
    return piece.isalpha() and len(piece) >= min_letters and not following.startswith("##")


def whole_word_blanks(held_out, words, tokenizer, *, min_letters: int = 4) -> torch.Tensor:
    """For every blank of ``held_out``, in the order of ``checkpoints.scores.blank_predictions``, whether it
    hides a whole word of ``min_letters`` letters or more (the kind :func:`pick_blanks` shows)."""
    flags = []
    for ids, labels in zip(held_out.input_ids, held_out.labels, strict=True):
        for position in torch.nonzero(labels != IGNORE_INDEX).flatten().tolist():
            flags.append(_whole_word(ids, labels, position, words, tokenizer, min_letters))
    return torch.tensor(flags, dtype=torch.bool)


@torch.no_grad()
def top_guesses(model, input_ids, position: int, words, tokenizer, k: int = 5) -> list:
    """``[(piece, probability), ...]``: the model's ``k`` most probable pieces at ``position``."""
    model.eval()
    hidden = model.bert(input_ids=input_ids[None]).last_hidden_state[0, position]
    probabilities = model.cls(hidden[None])[0].softmax(-1)
    top = probabilities.topk(k)
    pieces = tokenizer.convert_ids_to_tokens(words.decode(top.indices).tolist())
    return list(zip(pieces, top.values.tolist(), strict=True))


def context(input_ids, labels, position: int, words, tokenizer, width: int = 14) -> str:
    """The ``width`` pieces either side of the blank at ``position`` as text, the blank as ``____``;
    other blanks of the block show their true word (only one question at a time)."""
    original = torch.where(labels != IGNORE_INDEX, labels, input_ids)
    pieces = tokenizer.convert_ids_to_tokens(words.decode(original).tolist())
    left = tokenizer.convert_tokens_to_string(pieces[max(1, position - width) : position])
    right = tokenizer.convert_tokens_to_string(pieces[position + 1 : position + 1 + width])
    return f"…{left} ____ {right}…"


def window(input_ids, labels, position: int, length: int, cls_id: int, sep_id: int) -> tuple:
    """The block around ``position`` cut to ``length`` pieces (``[CLS]`` and ``[SEP]`` included), with
    only that blank kept: ``(input_ids, position in the window)``. Other blanks get their true word back."""
    body = length - 2
    original = torch.where(labels != IGNORE_INDEX, labels, input_ids)
    original[position] = input_ids[position]
    inner = original[1:-1]
    start = min(max(0, position - 1 - body // 2), max(0, inner.shape[0] - body))
    piece = inner[start : start + body]
    return torch.cat([torch.tensor([cls_id]), piece, torch.tensor([sep_id])]), position - 1 - start + 1


def showcase_blanks(
    held_out,
    words,
    tokenizer,
    articles,
    *,
    count: int = 10,
    min_letters: int = 4,
    margin: int = 3,
    skip_first: int = 24,
    stop_words=(),
) -> list:
    """``(block, position)`` of ``count`` blanks chosen by a rule fair to a model that reads both sides:
    a whole word of ``min_letters`` or more, not in ``stop_words``, hidden by ``[MASK]``, with ``margin``
    unmasked pieces on each side, not in the first ``skip_first`` pieces of an article's first block (where
    the headline runs into the text with no full stop), at most one per article, spread evenly over the
    candidates. ``articles`` gives each block's article (``CourseData.test_articles``)."""
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")

    def wanted(ids, labels, position):
        return (
            _whole_word(ids, labels, position, words, tokenizer, min_letters)
            and piece(labels[position], words, tokenizer) not in stop_words
        )

    candidates = _fair_blanks(held_out, words, tokenizer, articles, margin, skip_first, wanted)
    step = max(1, len(candidates) // count)
    return candidates[::step][:count]


def random_blanks(
    held_out, words, tokenizer, articles, *, count: int = 10, seed: int = 0, margin: int = 3, skip_first: int = 24
) -> list:
    """``(block, position)`` of ``count`` blanks of any kind, drawn at random (a generator seeded ``seed``)
    under :func:`showcase_blanks`' rule of fairness: hidden by ``[MASK]``, ``margin`` unmasked pieces on
    each side, not where the headline runs into the text, at most one per article (its first such blank)."""
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    candidates = _fair_blanks(held_out, words, tokenizer, articles, margin, skip_first, lambda *_: True)
    order = torch.randperm(len(candidates), generator=torch.Generator().manual_seed(seed))
    return sorted(candidates[i] for i in order[:count].tolist())


def _fair_blanks(held_out, words, tokenizer, articles, margin: int, skip_first: int, wanted) -> list:
    """Per article, the first ``[MASK]`` blank with ``margin`` unmasked pieces on each side, past the
    headline, for which ``wanted(ids, labels, position)`` holds: ``[(block, position), ...]``."""
    mask_id, seen, candidates = words(tokenizer.mask_token_id), set(), []
    first_block = torch.ones(len(articles), dtype=torch.bool)
    first_block[1:] = articles[1:] != articles[:-1]
    for block in range(held_out.input_ids.shape[0]):
        ids, labels = held_out.input_ids[block], held_out.labels[block]
        start = max(1 + margin, skip_first if first_block[block] else 0)
        for position in range(start, ids.shape[0] - 1 - margin):
            near = labels[position - margin : position + margin + 1] != IGNORE_INDEX
            if ids[position] != mask_id or int(near.sum()) != 1 or int(articles[block]) in seen:
                continue
            if wanted(ids, labels, position):
                candidates.append((block, position))
                seen.add(int(articles[block]))
                break
    return candidates


@torch.no_grad()
def guesses_at(model, held_out, blanks, words, tokenizer, k: int = 3) -> list:
    """The model's ``k`` best pieces at each ``(block, position)`` of ``blanks``, as
    ``[[piece, probability], ...]`` lists (what ``make pretrain`` logs during training). The model's
    training mode is restored afterwards."""
    was_training = model.training
    out = [
        [
            [word, round(p, 4)]
            for word, p in top_guesses(model, held_out.input_ids[block], position, words, tokenizer, k)
        ]
        for block, position in blanks
    ]
    model.train(was_training)
    return out


@torch.no_grad()
def guess(model, text: str, words, tokenizer, k: int = 5) -> list:
    """The model's ``k`` best pieces for each ``[MASK]`` in ``text``: ``[[(piece, probability), ...], ...]``.

    ``text`` is lower-cased and cut into WordPiece pieces; pieces outside the model's vocabulary become
    ``[UNK]``. A clear error says what is allowed when there is no ``[MASK]`` or the text is too long."""
    if not isinstance(text, str) or "[MASK]" not in text:
        raise ValueError(f"write a sentence with at least one [MASK] in it, got {text!r}")
    ids = tokenizer(text, truncation=False)["input_ids"]
    length = model.config.max_position_embeddings
    if len(ids) > length:
        raise ValueError(f"the text has {len(ids)} pieces with [CLS] and [SEP]; this model reads at most {length}")
    compact = words.encode(torch.tensor(ids))
    positions = torch.nonzero(compact == words(tokenizer.mask_token_id)).flatten().tolist()
    return [top_guesses(model, compact, p, words, tokenizer, k) for p in positions]


def piece(compact_id, words, tokenizer) -> str:
    """The WordPiece piece of one compact id."""
    return tokenizer.convert_ids_to_tokens(int(words.decode(torch.as_tensor(compact_id))))


def wrap(text: str, width: int | None = None, first: str = "", indent: str = "    ") -> str:
    """``text`` wrapped to ``width`` columns (default: the page's output column), its first line led by
    ``first``."""
    import textwrap

    from .env import OUTPUT_WIDTH

    width = width or OUTPUT_WIDTH
    return textwrap.fill(text, width, initial_indent=first, subsequent_indent=indent)
