"""Lesson 1's long runs: a tiny BERT trained for many epochs on BBC articles under each masking schedule
(static, static with ten copies, dynamic), three seeds each; its data are lessons 2's and 4's small runs'
too (:func:`masking_data`, :func:`tiny_config`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .common import Experiment, Settings, file_name, halve, load_into, save


@dataclass(frozen=True)
class MaskingSettings(Settings):
    articles: int  # BBC training articles
    blocks_per_article: int  # 64-piece blocks taken from each
    test_articles: int
    length: int  # pieces per block
    min_count: int  # a piece seen fewer times is [UNK] (the compact vocabulary)
    hidden: int
    layers: int
    heads: int
    dropout: float
    steps: int
    batch: int
    lr: float
    warmup: int
    eval_every: int
    seeds: tuple
    schemes: tuple
    held_out_seed: int  # the test blocks' one fixed mask
    new_mask_seed: int  # the training blocks under a mask no model trained on
    stored_seeds: tuple  # whose weights are stored


#: Lesson 1: a tiny BERT on 800 BBC training articles (two 64-piece blocks each), 20 epochs.
MASKING = MaskingSettings(
    articles=800,
    blocks_per_article=2,
    test_articles=200,
    length=64,
    min_count=3,
    hidden=64,
    layers=2,
    heads=2,
    dropout=0.1,
    steps=1000,
    batch=32,
    lr=3e-3,
    warmup=50,
    eval_every=125,
    seeds=(0, 1, 2),
    schemes=("static", "static x10", "dynamic"),
    held_out_seed=2024,
    new_mask_seed=2025,
    stored_seeds=(0,),
)


@dataclass
class MaskingData:
    """What lesson 1's long runs train and are measured on."""

    train: torch.Tensor  # compact ids, (blocks, length)
    held_out: object  # pretraining.HeldOut on the test articles
    new_mask: object  # pretraining.HeldOut: the training blocks with masks no model trained on
    small: dict  # vocab_size, mask_token_id, special_ids (compact ids)
    config: object  # the BertConfig of every model
    unigram: float  # the unigram baseline on the held-out blanks (nats)
    majority: float  # the most frequent training word's share of the held-out blanks
    words: object = None  # pretraining.CompactVocabulary: WordPiece id <-> compact id


def masking_data(settings: MaskingSettings = MASKING) -> MaskingData:
    from bertfamily.data import bbc_split
    from bertfamily.models import minilm_tokenizer
    from bertfamily.pretraining import HeldOut, compact_corpus, tiny_bert_config, token_blocks, unigram_baseline

    s = settings
    tokenizer, split = minilm_tokenizer(), bbc_split()
    train_ids = token_blocks(
        tokenizer, split.train_texts[: s.articles], length=s.length, max_blocks_per_text=s.blocks_per_article
    )
    test_ids = token_blocks(tokenizer, split.test_texts[: s.test_articles], length=s.length, max_blocks_per_text=1)
    words, train, test, small = compact_corpus(tokenizer, train_ids, test_ids, min_count=s.min_count)
    held_out = HeldOut.fixed_mask(test, seed=s.held_out_seed, **small)
    new_mask = HeldOut.fixed_mask(train, seed=s.new_mask_seed, **small)
    unigram, majority = unigram_baseline(train, held_out, vocab_size=words.size, special_ids=small["special_ids"])
    config = tiny_bert_config(
        words.size, hidden=s.hidden, layers=s.layers, heads=s.heads, max_positions=s.length, dropout=s.dropout
    )
    return MaskingData(train, held_out, new_mask, small, config, unigram, majority, words)


def tiny_config(data: MaskingData, layers: int, settings):
    """A tiny BERT's config for lesson 1's data with ``layers`` layers and ``settings``' width, heads and
    dropout (lessons 2's and 4's small runs)."""
    from bertfamily.pretraining import tiny_bert_config

    s = settings
    return tiny_bert_config(
        data.small["vocab_size"],
        hidden=s.hidden,
        layers=layers,
        heads=s.heads,
        max_positions=data.train.shape[1],
        dropout=s.dropout,
    )


def masking_scheme(data: MaskingData, name: str, generator):
    from bertfamily.masking import DynamicMasking, StaticMasking

    if name == "static":
        return StaticMasking(data.train, generator=generator, **data.small)
    if name == "static x10":
        return StaticMasking(data.train, copies=10, generator=generator, **data.small)
    if name == "dynamic":
        return DynamicMasking(data.train, generator=generator, **data.small)
    raise ValueError(f"scheme must be one of {list(MASKING.schemes)}, got {name!r}")


def train_run(
    data: MaskingData, model, scheme: str, seed: int, steps: int, settings, *, lr=None, eval_every=None, loss=None
):
    """``model`` trained ``steps`` steps, as every tiny-BERT run of lessons 1, 2 and 4 is: ``scheme``'s masks and
    the batch order from a generator seeded ``seed`` (dropout too), ``settings``' batch, warm-up, learning rate
    and evaluation interval (``lr`` and ``eval_every`` where they differ), ``loss`` where it is not the
    masked-LM loss: ``(history, the scheme)``."""
    from bertfamily.pretraining import train_mlm

    s = settings
    generator = torch.Generator().manual_seed(seed)
    masking = masking_scheme(data, scheme, generator)
    torch.manual_seed(seed)  # dropout draws from torch's global generator: each run starts it afresh
    history = train_mlm(
        model,
        masking,
        steps=steps,
        batch_size=s.batch,
        lr=s.lr if lr is None else lr,
        warmup=s.warmup,
        generator=generator,
        held_out=data.held_out,
        eval_every=s.eval_every if eval_every is None else eval_every,
        progress=False,
        loss=loss,
    )
    return history, masking


def train_masking_run(data: MaskingData, scheme: str, seed: int, steps: int, settings: MaskingSettings = MASKING):
    """One of lesson 1's long runs (or its first ``steps``): ``(model, history, the scheme)``."""
    from bertfamily.pretraining import tiny_bert

    model = tiny_bert(data.config, seed=seed)  # its own seed: no draw of the scheme's generator
    history, masking = train_run(data, model, scheme, seed, steps, settings)
    return model, history, masking


def load_masking(data: MaskingData, scheme: str, seed: int = 0):
    """The stored seed-``seed`` model of ``scheme``."""
    from bertfamily.pretraining import tiny_bert

    return load_into(tiny_bert(data.config), file_name("masking", scheme, seed))


def seed_runs(experiment: str, keys, settings, train, progress) -> dict:
    """``{key: [run of seed, ...]}`` for each of ``settings.seeds`` and each of ``keys`` (schemes, variants):
    ``train(key, seed) -> (model, what its log holds)``; the weights of ``settings.stored_seeds`` are stored."""
    runs = {key: [] for key in keys}
    for seed in settings.seeds:
        for key in keys:
            model, run = train(key, seed)
            runs[key].append({"seed": seed, **run})
            if seed in settings.stored_seeds:
                save(model, file_name(experiment, key, seed))
            progress(
                f"{experiment} {key} seed {seed}: held-out {run['held']['loss']:.3f} nats ({run['seconds']:.0f} s)"
            )
    return runs


def run_masking(progress, record, settings: MaskingSettings = MASKING) -> dict:
    """Every scheme and seed of :data:`MASKING`; per run its curve and the metrics of the stored float16
    weights on the masks it saw last (``own``), on new masks of its training blocks and on the test blanks."""
    from bertfamily.pretraining import evaluate_mlm

    s = settings
    data = masking_data(s)

    def train(name, seed):
        start = time.perf_counter()
        model, history, scheme = train_masking_run(data, name, seed, s.steps, s)
        halve(model)  # the metrics of the weights as stored
        seen = scheme(torch.arange(len(scheme)), history.epochs - 1)  # the masks of its last epoch
        return model, {
            "epochs": history.epochs,
            "curve_steps": history.eval_steps,
            "curve_loss": history.eval_loss,
            "first_losses": history.train_loss[:5],
            "own": evaluate_mlm(model, seen),
            "new": evaluate_mlm(model, data.new_mask),
            "held": evaluate_mlm(model, data.held_out),
            "seconds": round(time.perf_counter() - start, 1),
        }

    return {
        "settings": s.to_log(),
        "unigram": data.unigram,
        "majority": data.majority,
        "runs": seed_runs("masking", s.schemes, s, train, progress),
    }


EXPERIMENT = Experiment("masking", "1", MASKING, run_masking)
