"""One encoder pass over a corpus, computed once per run and reused by every experiment of a lesson.

Running all-MiniLM-L6-v2 over the 2,127 BBC articles is the expensive step of the lessons that use a
real teacher (several seconds on two cores even truncated to 64 tokens). :func:`encode` runs it
once for a given encoder, text list and length, keeps the result in memory, and hands back the same
:class:`Features` on every later call, so that a notebook can ask for the features wherever it
needs them without paying twice.

:func:`mean_pool` is the course's one mean pooling, and :func:`embed` its one sentence embedding
(L2-normalised mean-pooled last hidden states, in batches).

What is kept: the token ids and attention mask (for students that read the same WordPiece ids),
the mean-pooled last hidden state (for linear heads), and, on request, the hidden states of the
last layer at every position (for a cosine loss against a student).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

__all__ = ["Features", "encode", "mean_pool", "bags_of_words", "embed", "clear_cache", "bbc_features"]

_CACHE: dict = {}


@dataclass(frozen=True)
class Features:
    """The result of one encoder pass: one row per text, padded to the longest text in the corpus."""

    input_ids: torch.Tensor  # (N, L) long
    attention_mask: torch.Tensor  # (N, L) long, 1 on real tokens
    pooled: torch.Tensor  # (N, H) float: mean of the last hidden state over real tokens
    hidden: torch.Tensor | None  # (N, L, H) float, only with keep_hidden=True
    max_length: int

    def __len__(self) -> int:
        return self.input_ids.shape[0]


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``hidden`` (N, L, H) over the positions where ``attention_mask`` (N, L) is 1."""
    if hidden.dim() != 3 or attention_mask.shape != hidden.shape[:2]:
        raise ValueError(
            f"need hidden (N, L, H) and attention_mask (N, L), got {tuple(hidden.shape)} "
            f"and {tuple(attention_mask.shape)}"
        )
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)


def bags_of_words(table: torch.Tensor, train, test) -> tuple[torch.Tensor, torch.Tensor]:
    """Each article of ``train`` and ``test`` (:class:`Features`) as the mean of its word vectors from
    ``table`` (no context, no order), standardised with the training articles' mean and spread."""
    bags = [mean_pool(table[x.input_ids], x.attention_mask) for x in (train, test)]
    mu, sd = bags[0].mean(0), bags[0].std(0)
    return (bags[0] - mu) / sd, (bags[1] - mu) / sd


def embed(model, tokenizer, texts, batch_size: int = 32, max_length: int = 128, prefix: str = ""):
    """L2-normalised mean-pooled sentence embeddings (a float tensor, one row per text, in the order of
    ``texts``), no gradients.

    Mean pooling over the real tokens (padding excluded, :func:`mean_pool`) is how all-MiniLM-L6-v2
    and the e5 models are meant to be used; ``prefix`` is prepended to every text (e5 expects
    ``"query: "``). The course's one sentence embedding: ``e5.embed`` is this with e5's prefix.

    The texts are batched shortest first, so that a batch is padded to texts of about its own length
    (BBC titles: 8.6 word pieces on average, 16 at most; in the order given, a batch of 128 is padded
    to nearly 16, and the encoder does about twice the work). A row does not depend on its batch's
    padding, which the mask excludes, beyond rounding (1e-7 here).
    """
    from tqdm.auto import tqdm

    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty list of strings")
    texts = [prefix + t for t in texts]
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
    order = sorted(range(len(texts)), key=lengths.__getitem__)
    batches = range(0, len(texts), batch_size)
    rows = []
    with torch.no_grad():
        for i in tqdm(batches, desc="embedding", disable=len(batches) < 8, leave=False):
            batch = tokenizer(
                [texts[j] for j in order[i : i + batch_size]],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            )
            rows.append(mean_pool(model(**batch).last_hidden_state, batch["attention_mask"]))  # (n, H)
    pooled = torch.empty(len(texts), rows[0].shape[-1], dtype=rows[0].dtype)
    pooled[torch.tensor(order)] = torch.cat(rows)  # back in the order of ``texts``
    return torch.nn.functional.normalize(pooled, dim=-1)


def _key(model, texts, max_length, keep_hidden):
    digest = hashlib.sha1()
    for t in texts:
        digest.update(t.encode("utf-8", errors="replace"))
        digest.update(b"\0")
    return (id(model), len(texts), digest.hexdigest(), max_length, keep_hidden)


def clear_cache() -> None:
    """Forget every cached pass (to measure the cost of a fresh one)."""
    _CACHE.clear()


def encode(
    model,
    tokenizer,
    texts,
    max_length: int = 64,
    batch_size: int = 64,
    keep_hidden: bool = False,
    progress: bool = True,
) -> Features:
    """Run ``model`` over ``texts`` once (truncated to ``max_length`` tokens), cached for this process.

    A second call with the same model object, texts, length and ``keep_hidden`` returns the cached
    :class:`Features` at no cost. ``keep_hidden=True`` also keeps the last hidden state at every
    position (N x L x H floats: 2,127 articles x 64 x 384 is about 200 MiB).
    """
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError("texts must be a non-empty list of strings")
    if not isinstance(max_length, int) or max_length < 2:
        raise ValueError(f"max_length must be an integer >= 2 ([CLS] and [SEP]), got {max_length!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    key = _key(model, texts, max_length, keep_hidden)
    if key in _CACHE:
        return _CACHE[key]
    if not keep_hidden:  # a pass that kept the hidden states also holds the pooled ones
        wider = key[:-1] + (True,)
        if wider in _CACHE:
            return _CACHE[wider]
    from tqdm.auto import tqdm

    batch = tokenizer(list(texts), padding="longest", truncation=True, max_length=max_length, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    pooled, hidden = [], []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for i in tqdm(range(0, len(texts), batch_size), desc="encoder pass", disable=not progress, leave=False):
            out = model(input_ids=ids[i : i + batch_size], attention_mask=mask[i : i + batch_size]).last_hidden_state
            pooled.append(mean_pool(out, mask[i : i + batch_size]))
            if keep_hidden:
                hidden.append(out)
    model.train(was_training)
    features = Features(ids, mask, torch.cat(pooled), torch.cat(hidden) if keep_hidden else None, max_length)
    _CACHE[key] = features
    return features


def bbc_features(model, tokenizer, max_length: int = 64, keep_hidden: bool = False, progress: bool = True):
    """The course's BBC split and the encoder pass over it: ``(split, train Features, test Features)``.

    Both halves come from one cached pass over train + test texts, so a notebook that calls this
    twice pays once.
    """
    from .data import bbc_split

    split = bbc_split()
    texts = list(split.train_texts) + list(split.test_texts)
    every = encode(model, tokenizer, texts, max_length=max_length, keep_hidden=keep_hidden, progress=progress)
    n = len(split.train_texts)

    def part(sl):
        return Features(
            every.input_ids[sl],
            every.attention_mask[sl],
            every.pooled[sl],
            None if every.hidden is None else every.hidden[sl],
            max_length,
        )

    return split, part(slice(0, n)), part(slice(n, None))
