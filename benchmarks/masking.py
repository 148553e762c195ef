"""Masking throughput: ``bertfamily.masking.mask_tokens`` against transformers' collator."""

from __future__ import annotations

import statistics


def masking_batch(rows: int = 200, length: int = 128):
    """The batch lesson 01 uses: ``rows`` blocks of ``length`` word pieces of BBC articles."""
    from bertfamily.data import bbc_news
    from bertfamily.models import minilm_tokenizer
    from bertfamily.pretraining import token_blocks

    tokenizer = minilm_tokenizer()
    texts, _ = bbc_news()
    return tokenizer, token_blocks(tokenizer, texts[:rows], length=length)[:rows]


def masking_comparison(tokenizer, batch, probability: float = 0.15, repeats: int = 100, seed: int = 0) -> dict:
    """Masking throughput of ``bertfamily.masking.mask_tokens`` and of transformers' collator.

    The same ``batch`` (2-D tensor of ids) and ``probability`` for all three contestants:

    * ``bertfamily.mask_tokens``: finds the special tokens itself;
    * ``collator.torch_mask_tokens``: the collator's masking step, handed a ready special-tokens mask;
    * ``collator(examples)``: calling the collator on a list of ``{"input_ids": row}`` examples, as a
      ``DataLoader`` does (it also pads, converts and looks up the special tokens row by row).

    After one warm-up call each, every repeat times each contestant once, in an order that rotates
    from repeat to repeat, so a slow moment of the machine touches all of them. Returns the median
    seconds, tokens per second (``batch.numel() / median``) and ``ratio``: our tokens per second over
    each collator variant's (above 1: ours is faster).
    """
    import torch
    from transformers import DataCollatorForLanguageModeling

    from bertfamily.masking import mask_tokens
    from bertfamily.timing import run_times

    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    batch = torch.as_tensor(batch)
    if batch.dim() != 2 or batch.numel() == 0:
        raise ValueError(f"batch must be a non-empty 2-D tensor of token ids, got shape {tuple(batch.shape)}")
    generator = torch.Generator().manual_seed(seed)
    vocab = dict(
        vocab_size=len(tokenizer),
        mask_token_id=tokenizer.mask_token_id,
        special_ids=tokenizer.all_special_ids,
        pad_token_id=tokenizer.pad_token_id,
    )
    protected = torch.isin(batch, torch.tensor(tokenizer.all_special_ids))
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability, seed=seed)
    examples = [{"input_ids": row} for row in batch.tolist()]
    contestants = {
        "bertfamily.mask_tokens": lambda: mask_tokens(batch, generator=generator, probability=probability, **vocab),
        "collator.torch_mask_tokens": lambda: collator.torch_mask_tokens(batch.clone(), special_tokens_mask=protected),
        "collator(examples)": lambda: collator(examples),
    }
    names = list(contestants)
    times = run_times(contestants, warmup=1, runs=repeats, rotate=True)  # the order rotates, run by run
    tokens = batch.numel()
    median = {name: statistics.median(ts) for name, ts in times.items()}
    throughput = {name: tokens / s for name, s in median.items()}
    ours = names[0]
    return {
        "batch": list(batch.shape),
        "tokens": tokens,
        "probability": probability,
        "repeats": repeats,
        "torch_threads": torch.get_num_threads(),
        "median_s": median,
        "spread_s": {name: [min(ts), max(ts)] for name, ts in times.items()},
        "tokens_per_s": throughput,
        "ours": ours,
        "ratio": {name: throughput[ours] / throughput[name] for name in names[1:]},
    }
