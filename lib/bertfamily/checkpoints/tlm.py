"""Lesson 6's models: MLM, TLM and XLM's alternating MLM+TLM, three seeds each, on the lexicon's parallel
sentences (:mod:`bertfamily.lexicon`), every model stored."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .common import Experiment, Settings, file_name, halve, load_into, save


@dataclass(frozen=True)
class TlmSettings(Settings):
    pairs: int  # English-Italian pairs drawn from the lexicon
    pairs_seed: int
    test_fraction: float
    split_seed: int
    vocab: int  # the pair tokenizer's vocabulary
    hidden: int
    layers: int
    heads: int
    steps: int
    batch: int
    probability: float  # the masking probability
    seeds: tuple
    objectives: tuple
    stored_seeds: tuple
    mismatched_shift: int  # the mismatched English comes from this many pairs further on


#: Lesson 6: MLM, TLM and XLM's alternating MLM+TLM models on the lexicon's parallel sentences.
TLM = TlmSettings(
    pairs=3000,
    pairs_seed=0,
    test_fraction=0.2,
    split_seed=0,
    vocab=1000,
    hidden=64,
    layers=2,
    heads=4,
    steps=3000,
    batch=32,
    probability=0.3,
    seeds=(0, 1, 2),
    objectives=("mlm", "tlm", "mlm+tlm"),
    stored_seeds=(0, 1, 2),
    mismatched_shift=300,
)


@dataclass
class TlmData:
    """What lesson 6's models train and are measured on."""

    tokenizer: object
    train: tuple  # (English ids, Italian ids) per training pair
    test: tuple  # the same for the held-out pairs
    translation: dict  # Italian token id -> English token id (the lexicon's words)
    content: set  # the Italian ids of the lexicon's words (nouns, adjectives, verbs)


def tlm_data(settings: TlmSettings = TLM) -> TlmData:
    from bertfamily import lexicon
    from bertfamily import pairs as tlm_pairs

    s = settings
    pairs = lexicon.lexicon_pairs(s.pairs, seed=s.pairs_seed)
    train, test = tlm_pairs.split_pairs(pairs, test_fraction=s.test_fraction, seed=s.split_seed)
    tokenizer = tlm_pairs.train_tokenizer([x for pair in pairs for x in pair], vocab_size=s.vocab)
    translation = lexicon.translations(tokenizer)
    return TlmData(
        tokenizer,
        tlm_pairs.encode_pairs(tokenizer, train),
        tlm_pairs.encode_pairs(tokenizer, test),
        translation,
        set(translation),
    )


def tlm_blanks(data: TlmData, settings: TlmSettings = TLM) -> dict:
    """The held-out blanks of each condition, and which rows hide a lexicon word (the same in each).

    The pairs are sorted, so neighbours share their first words: the mismatched English comes from
    ``mismatched_shift`` pairs further on (about half the held-out set), which says something else."""
    from bertfamily import tlm

    blanks = {c: tlm.italian_blanks(*data.test, c, shift=settings.mismatched_shift) for c in tlm.CONDITIONS}
    content = torch.tensor([int(t) in data.content for t in blanks["with"].target])
    return blanks, content


def content_accuracy(model, blanks: dict, content) -> dict:
    from bertfamily import tlm

    return {c: float(tlm.blank_accuracy(model, b)[content].float().mean()) for c, b in blanks.items()}


def tlm_model(data: TlmData, seed: int, settings: TlmSettings = TLM):
    """A fresh model of :data:`TLM`'s shape for ``data``'s tokenizer."""
    from bertfamily import tlm

    return tlm.tiny_model(
        data.tokenizer.get_vocab_size(), seed=seed, hidden=settings.hidden, layers=settings.layers, heads=settings.heads
    )


def load_tlm(data: TlmData, objective: str, seed: int, settings: TlmSettings = TLM):
    return load_into(tlm_model(data, seed, settings), file_name("tlm", objective, seed))


def run_tlm(progress, record, settings: TlmSettings = TLM) -> dict:
    """Every objective and seed of :data:`TLM`, two one-thread jobs at a time; per model its loss every 100
    steps and its accuracy on the held-out content words in each condition (of the stored float16 weights)."""
    from bertfamily import tlm

    s = settings
    data = tlm_data(s)
    vocab = data.tokenizer.get_vocab_size()
    runs = {}
    blanks, content = tlm_blanks(data, s)
    jobs = [(objective, seed) for seed in s.seeds for objective in s.objectives]
    # independent one-thread jobs, two at a time: the same models as a serial loop would train
    shape = {"hidden": s.hidden, "layers": s.layers, "heads": s.heads}
    models, losses = tlm.train_models(
        vocab,
        *data.train,
        jobs,
        steps=s.steps,
        batch_size=s.batch,
        processes=2,
        model_kw=shape,
        progress=False,
        probability=s.probability,
    )
    for objective, seed in jobs:
        model = models[objective, seed]
        halve(model)
        accuracy = content_accuracy(model, blanks, content)
        runs[f"{objective}-{seed}"] = {
            "objective": objective,
            "seed": seed,
            "loss_curve": losses[objective, seed][::100],
            "content_accuracy": accuracy,
        }
        if seed in s.stored_seeds:
            save(model, file_name("tlm", objective, seed))
        progress(f"tlm {objective} seed {seed}: " + ", ".join(f"{c} {100 * a:.1f}%" for c, a in accuracy.items()))
    return {"settings": s.to_log(), "blanks": int(content.sum()), "runs": runs}


EXPERIMENT = Experiment("tlm", "6", TLM, run_tlm)
