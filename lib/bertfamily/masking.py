"""BERT's masked-language-model corruption, and the two ways of scheduling it.

* :func:`mask_tokens` is BERT's recipe as one vectorised function on a batch of token ids:
  choose ``probability`` (15%) of the positions that are neither special tokens nor padding;
  of those, replace 80% with ``[MASK]``, 10% with a random token, and keep 10% unchanged.
  The labels hold the original id at every chosen position and ``-100`` (ignored by
  ``torch.nn.CrossEntropyLoss``) everywhere else.
* :class:`StaticMasking` is BERT's schedule: each sequence is masked once, when the data is
  prepared, and that corruption is reused every epoch. With ``copies=10`` it is RoBERTa's static
  baseline: the data duplicated ten times, each copy with its own mask.
* :class:`DynamicMasking` is RoBERTa's schedule: a fresh mask every time a sequence is served.
* :func:`tlm_inputs` builds XLM's translation-language-modelling input from aligned sentence
  pairs (``[CLS] first [SEP] second [SEP]``, language ids, positions restarting at the second
  sentence) and a ``special_mask`` to pass to :func:`mask_tokens`, so that one mask runs across
  the whole pair and never touches ``[CLS]``, ``[SEP]`` or padding.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

IGNORE_INDEX = -100  # the label that torch.nn.CrossEntropyLoss (and transformers) skip

__all__ = ["IGNORE_INDEX", "mask_tokens", "StaticMasking", "DynamicMasking", "distinct_views",
           "tlm_inputs", "as_batch", "ACTIONS", "actions", "render", "masking_vocabulary", "epoch_actions",
           "show_epoch", "action_rates"]


# --------------------------------------------------------------------------- input checking

def as_batch(input_ids, name: str = "input_ids") -> torch.Tensor:
    """``input_ids`` as a 2-D ``torch.long`` tensor (rows = sequences); a clear error otherwise.

    Accepts a tensor (1-D: one sequence, or 2-D) or a list of equally long lists of ints.
    """
    if isinstance(input_ids, torch.Tensor):
        ids = input_ids
    else:
        rows = list(input_ids)
        if len(rows) == 0:
            raise ValueError(f"{name} is empty: give at least one sequence of token ids")
        if all(isinstance(r, (int,)) for r in rows):
            rows = [rows]
        lengths = {len(r) for r in rows}
        if len(lengths) != 1:
            raise ValueError(f"{name} is ragged: sequences have lengths {sorted(lengths)}; "
                             "pad them to one length (and pass pad_token_id or attention_mask)")
        try:
            ids = torch.tensor(rows, dtype=torch.long)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must hold integer token ids: {err}") from None
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise ValueError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)
    if ids.dim() != 2:
        raise ValueError(f"{name} must be a batch of sequences (2-D), got shape {tuple(ids.shape)}")
    if ids.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(ids.shape)}): give at least one token")
    return ids.long()


def _check_mask_arguments(probability, split, vocab_size, mask_token_id):
    if not isinstance(probability, (int, float)) or not 0.0 < float(probability) < 1.0:
        raise ValueError(f"mask probability must be in (0, 1), got {probability!r}")
    try:
        split = tuple(float(s) for s in split)
    except TypeError:
        raise ValueError(f"split must be three numbers (mask, random, keep), got {split!r}") from None
    if len(split) != 3 or any(s < 0 for s in split) or not math.isclose(sum(split), 1.0, abs_tol=1e-6):
        raise ValueError("split must be three non-negative fractions (mask, random, keep) "
                         f"that add up to 1, got {split!r}")
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    if not isinstance(mask_token_id, int) or not 0 <= mask_token_id < vocab_size:
        raise ValueError(f"mask_token_id must be an id in [0, {vocab_size}), got {mask_token_id!r}")
    return split


# --------------------------------------------------------------------------- BERT's corruption

def mask_tokens(input_ids, *, vocab_size: int, mask_token_id: int,
                special_ids: Sequence[int] = (),
                pad_token_id: int | None = None,
                probability: float = 0.15,
                split: Sequence[float] = (0.8, 0.1, 0.1),
                generator: torch.Generator | None = None,
                attention_mask=None, special_mask=None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-LM corruption of a batch: returns ``(corrupted_ids, labels)``.

    Each position that is not excluded is chosen independently with ``probability``. A chosen
    position becomes ``mask_token_id`` with probability ``split[0]``, a uniformly random id in
    ``[0, vocab_size)`` with ``split[1]``, and stays as it is with ``split[2]``. ``labels`` is the
    original id at chosen positions and ``IGNORE_INDEX`` (-100) elsewhere.

    Never chosen: ids in ``special_ids``, ``pad_token_id``, positions where ``attention_mask`` is 0,
    and positions where ``special_mask`` is true (any boolean "do not touch" mask of the batch's
    shape, such as the one :func:`tlm_inputs` returns). The input is not modified.
    Randomness comes from ``generator`` (the global torch RNG when ``None``).
    """
    split = _check_mask_arguments(probability, split, vocab_size,
                                  mask_token_id)
    ids = as_batch(input_ids)
    if isinstance(input_ids, torch.Tensor):
        squeeze = input_ids.dim() == 1
    else:
        squeeze = all(isinstance(t, int) for t in input_ids)
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(f"input_ids must lie in [0, {vocab_size}) (the "
                         f"vocabulary), found ids from {low} to {high}")

    # 1. Which positions may be chosen at all.
    blocked = torch.zeros_like(ids, dtype=torch.bool)
    never = [int(i) for i in special_ids]
    if pad_token_id is not None:
        never.append(int(pad_token_id))
    if never:
        blocked |= torch.isin(ids, torch.tensor(never, dtype=torch.long))
    extras = (("attention_mask", attention_mask),
              ("special_mask", special_mask))
    for name, extra in extras:
        if extra is None:
            continue
        extra = torch.as_tensor(extra)
        if extra.dim() == 1:
            extra = extra.unsqueeze(0)
        if extra.shape != ids.shape:
            raise ValueError(f"{name} must have the shape of input_ids "
                             f"{tuple(ids.shape)}, got "
                             f"{tuple(extra.shape)}")
        if name == "attention_mask":
            blocked |= extra == 0
        else:
            blocked |= extra.bool()

    # 2. Choose positions, then what each chosen one becomes:
    #    one uniform draw each.
    draw = torch.rand(ids.shape, generator=generator)
    chosen = (draw < probability) & ~blocked
    action = torch.rand(ids.shape, generator=generator)
    to_mask = chosen & (action < split[0])
    to_random = chosen & (action >= split[0])
    to_random &= action < split[0] + split[1]

    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
    corrupted = torch.where(to_random, random_ids, ids)
    corrupted = torch.where(to_mask, mask_token_id, corrupted)
    labels = torch.where(chosen, ids, IGNORE_INDEX)
    if squeeze:
        return corrupted[0], labels[0]
    return corrupted, labels


# --------------------------------------------------------------------------- the two schedules

class StaticMasking:
    """BERT's schedule: mask the data once, when it is prepared, and reuse that corruption.

    ``copies`` masked versions of the whole data set are drawn up front (BERT: 1; RoBERTa's static
    baseline: 10). In epoch ``e`` every sequence is served as copy ``e % copies``, so a run of N
    epochs shows each sequence at most ``copies`` distinct ways.
    """

    def __init__(self, input_ids, *, copies: int = 1, generator: torch.Generator | None = None,
                 **mask_kwargs):
        if not isinstance(copies, int) or copies < 1:
            raise ValueError(f"copies must be a positive integer, got {copies!r}")
        self.input_ids = as_batch(input_ids)
        self.copies = copies
        masked = [mask_tokens(self.input_ids, generator=generator, **mask_kwargs) for _ in range(copies)]
        self.corrupted = torch.stack([c for c, _ in masked])  # (copies, rows, length)
        self.labels = torch.stack([l for _, l in masked])

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def __call__(self, rows, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The stored corruption of ``rows`` (indices into the data) for ``epoch``."""
        copy = epoch % self.copies
        return self.corrupted[copy, rows], self.labels[copy, rows]


class DynamicMasking:
    """RoBERTa's schedule: draw a fresh mask every time a sequence is served."""

    def __init__(self, input_ids, *, generator: torch.Generator | None = None, **mask_kwargs):
        self.input_ids = as_batch(input_ids)
        self.generator = generator
        self.mask_kwargs = mask_kwargs
        # check the arguments now, with a throwaway generator (the real one is left untouched)
        mask_tokens(self.input_ids[:1], generator=torch.Generator().manual_seed(0), **mask_kwargs)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def __call__(self, rows, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A new corruption of ``rows``; ``epoch`` is accepted for symmetry and not used."""
        return mask_tokens(self.input_ids[rows], generator=self.generator, **self.mask_kwargs)


def distinct_views(masking, row: int, epochs: int) -> int:
    """How many different corrupted versions of sequence ``row`` a run of ``epochs`` epochs shows."""
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    seen = set()
    for epoch in range(epochs):
        corrupted, labels = masking(torch.tensor([row]), epoch)
        seen.add((tuple(corrupted[0].tolist()), tuple(labels[0].tolist())))
    return len(seen)


#: What happened at each position, as :func:`actions` numbers it.
ACTIONS = ("untouched", "[MASK]", "random token", "kept, predicted")


def actions(input_ids, corrupted, labels, mask_token_id: int) -> torch.Tensor:
    """Per position: 0 not chosen, 1 replaced by ``[MASK]``, 2 replaced by a random token, 3 kept.

    (A random replacement that happens to draw the original token counts as kept.)
    """
    ids, corrupted, labels = (torch.as_tensor(t) for t in (input_ids, corrupted, labels))
    chosen = labels != IGNORE_INDEX
    out = torch.zeros_like(ids)
    out[chosen & (corrupted == mask_token_id)] = 1
    out[chosen & (corrupted != mask_token_id) & (corrupted != ids)] = 2
    out[chosen & (corrupted == ids)] = 3
    return out


def render(tokens: Sequence[str], corrupted_tokens: Sequence[str], codes) -> str:
    """One masked sequence as text: ``[MASK]``, ``<random>`` for a random token, ``(kept)``."""
    shown = []
    for original, new, code in zip(tokens, corrupted_tokens, torch.as_tensor(codes).tolist(), strict=True):
        shown.append({0: original, 1: "[MASK]", 2: f"<{new}>", 3: f"({original})"}[code])
    return " ".join(shown)


# --------------------------------------------------------------------------- XLM's TLM input

def _rows(side, name: str) -> list[list[int]]:
    if isinstance(side, torch.Tensor):
        side = side.tolist()
    rows = [list(r) for r in side]
    if not rows:
        raise ValueError(f"{name} is empty: give at least one sentence of token ids")
    for i, r in enumerate(rows):
        if len(r) == 0:
            raise ValueError(f"{name}[{i}] is empty: every pair needs tokens on both sides")
        if not all(isinstance(t, int) or (hasattr(t, "__index__") and not isinstance(t, bool)) for t in r):
            raise ValueError(f"{name}[{i}] must hold integer token ids")
    return [[int(t) for t in r] for r in rows]


def tlm_inputs(first_ids, second_ids, *, cls_id: int, sep_id: int,
               pad_id: int, lang_ids: tuple[int, int] = (0, 1)
               ) -> dict[str, torch.Tensor]:
    """XLM's translation-LM input for a batch of aligned pairs (row ``i`` of each side is one pair).

    Each row becomes ``[CLS] first [SEP] second [SEP]``, right-padded with ``pad_id`` to the
    longest row. Returned tensors, all of shape ``(pairs, length)``:

    * ``input_ids``; ``attention_mask`` (1 on tokens, 0 on padding);
    * ``language_ids``: ``lang_ids[0]`` on ``[CLS] first [SEP]``, ``lang_ids[1]`` on
      ``second [SEP]`` and on padding (feed them as ``token_type_ids`` to a BERT with
      ``type_vocab_size=2`` to get XLM's language embeddings);
    * ``position_ids``: 0, 1, ... over ``[CLS] first [SEP]``, restarting at 0 at the first token
      of the second sentence (XLM resets positions for the target sentence); 0 on padding;
    * ``special_mask``: true at ``[CLS]``, both ``[SEP]`` and padding. Pass it as
      ``mask_tokens(out["input_ids"], special_mask=out["special_mask"], ...)`` so one mask runs
      across both sentences and never touches them. To mask one side only, add the other side:
      ``special_mask=out["special_mask"] | (out["language_ids"] == lang_ids[0])``.
    """
    first = _rows(first_ids, "first_ids")
    second = _rows(second_ids, "second_ids")
    if len(first) != len(second):
        raise ValueError(f"first_ids and second_ids must hold as many "
                         f"sentences (one aligned pair per row), got "
                         f"{len(first)} and {len(second)}")
    if len(lang_ids) != 2:
        raise ValueError(f"lang_ids must be two ids (first, second), "
                         f"got {lang_ids!r}")
    rows = [[cls_id, *a, sep_id, *b, sep_id]
            for a, b in zip(first, second, strict=True)]
    length = max(len(r) for r in rows)
    n = len(rows)
    input_ids = torch.full((n, length), pad_id, dtype=torch.long)
    attention = torch.zeros((n, length), dtype=torch.long)
    language = torch.full((n, length), lang_ids[1], dtype=torch.long)
    positions = torch.zeros((n, length), dtype=torch.long)
    special = torch.ones((n, length), dtype=torch.bool)
    for i, (row, a, b) in enumerate(zip(rows, first, second, strict=True)):
        head, tail = len(a) + 2, len(b) + 1  # [CLS] a [SEP] | b [SEP]
        input_ids[i, :len(row)] = torch.tensor(row)
        attention[i, :len(row)] = 1
        language[i, :head] = lang_ids[0]
        positions[i, :head] = torch.arange(head)
        positions[i, head:head + tail] = torch.arange(tail)
        special[i, 1:head - 1] = False
        special[i, head:head + tail - 1] = False
    return {"input_ids": input_ids, "attention_mask": attention,
            "language_ids": language, "position_ids": positions,
            "special_mask": special}


# --------------------------------------------------------------------------- for showing masks

def masking_vocabulary(tokenizer) -> dict:
    """:func:`mask_tokens`' vocabulary arguments for a Hugging Face ``tokenizer``'s own ids."""
    return dict(vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id,
                special_ids=tokenizer.all_special_ids, pad_token_id=tokenizer.pad_token_id)


def epoch_actions(scheme, epoch: int, input_ids, tokenizer, row: int = 0) -> tuple:
    """``(corrupted ids, action codes)`` of row ``row`` of a masking ``scheme`` in ``epoch``
    (codes as :func:`actions` gives them)."""
    corrupted, labels = scheme(torch.tensor([row]), epoch)
    return corrupted[0], actions(input_ids[row], corrupted[0], labels[0], tokenizer.mask_token_id)


def show_epoch(scheme, epoch: int, input_ids, tokenizer, row: int = 0) -> str:
    """Row ``row`` as ``scheme`` masks it in ``epoch``, drawn by :func:`render`."""
    corrupted, codes = epoch_actions(scheme, epoch, input_ids, tokenizer, row)
    tokens = tokenizer.convert_ids_to_tokens(input_ids[row])
    return render(tokens, tokenizer.convert_ids_to_tokens(corrupted), codes)


def action_rates(input_ids, corrupted, labels, tokenizer) -> dict:
    """The share of (non-special) pieces ``chosen``, and of those the shares turned into
    ``mask``, a ``random`` piece or ``kept``; ``specials`` counts special pieces chosen (0 if right)."""
    protected = torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids))
    codes = actions(input_ids, corrupted, labels, tokenizer.mask_token_id)
    chosen = codes > 0
    n = chosen.sum().clamp(min=1)
    rates = {"chosen": float(chosen.sum() / (~protected).sum())}
    rates |= {key: float((codes == k).sum() / n) for k, key in ((1, "mask"), (2, "random"), (3, "kept"))}
    return rates | {"specials": int((chosen & protected).sum())}
