"""Lesson 4's runs: what sharing costs, at the course model's depth (4 layers), on lesson 1's data with
dynamic masking, the layers each its own (unshared) or one layer applied at every depth (shared)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .common import Experiment, Settings, file_name, halve, load_into
from .masking import MASKING, MaskingData, masking_data, seed_runs, tiny_config, train_run


@dataclass(frozen=True)
class SharingSettings(Settings):
    hidden: int
    heads: int
    dropout: float
    batch: int
    warmup: int
    seeds: tuple
    layers: int
    steps: int
    lr: float
    eval_every: int
    variants: tuple
    stored_seeds: tuple


#: Lesson 4: what sharing costs, at the course model's depth (4 layers). Lesson 1's tiny BERT, data and dynamic
#: masking (the course model's own width costs 4 s a step here, so six runs of it would take most of a day),
#: its four layers its own (unshared) or one layer applied four times (shared, ALBERT's cross-layer sharing):
#: the same width, depth and multiply-adds, a quarter of the layer weights. At this depth the tiny BERT needs a
#: lower learning rate than lesson 1's (3e-3 leaves some seeds on the word-frequency plateau) and more steps.
SHARING = SharingSettings(
    hidden=MASKING.hidden,
    heads=MASKING.heads,
    dropout=MASKING.dropout,
    batch=MASKING.batch,
    warmup=MASKING.warmup,
    seeds=MASKING.seeds,
    layers=4,
    steps=2000,
    lr=1e-3,
    eval_every=250,
    variants=("unshared", "shared"),
    stored_seeds=(0,),
)


def share_layers(model):
    """Make every encoder layer of a BERT the first one (one set of weights applied at every depth,
    as ALBERT does), in place; returns the model."""
    layers = model.bert.encoder.layer
    for i in range(1, len(layers)):
        layers[i] = layers[0]
    return model


def sharing_model(data: MaskingData, variant: str, seed: int = 0, settings: SharingSettings = SHARING):
    """A fresh tiny BERT for lesson 1's data, its layers ``"shared"`` or ``"unshared"``."""
    from bertfamily.pretraining import tiny_bert

    if variant not in settings.variants:
        raise ValueError(f"variant must be one of {list(settings.variants)}, got {variant!r}")
    model = tiny_bert(tiny_config(data, settings.layers, settings), seed=seed)
    return share_layers(model) if variant == "shared" else model


def train_sharing_run(data: MaskingData, variant: str, seed: int, steps: int, settings: SharingSettings = SHARING):
    """One of lesson 4's runs (or its first ``steps``), with dynamic masking: ``(model, history)``."""
    model = sharing_model(data, variant, seed, settings)
    history, _ = train_run(data, model, "dynamic", seed, steps, settings)
    return model, history


def load_sharing(data: MaskingData, variant: str, seed: int = 0):
    """The stored seed-``seed`` model of lesson 4's ``variant``."""
    return load_into(sharing_model(data, variant), file_name("sharing", variant, seed))


def run_sharing(progress, record, settings: SharingSettings = SHARING) -> dict:
    """Both variants of :data:`SHARING`, seed by seed; per run its size, curve and the metrics of the
    stored float16 weights, and the seconds its training took."""
    from bertfamily.models import count_parameters
    from bertfamily.pretraining import evaluate_mlm

    s = settings
    data = masking_data()

    def train(name, seed):
        start = time.perf_counter()
        model, history = train_sharing_run(data, name, seed, s.steps, s)
        seconds = time.perf_counter() - start  # training and its evaluations, before the final ones
        halve(model)
        return model, {
            "parameters": count_parameters(model),
            "curve_steps": history.eval_steps,
            "curve_loss": history.eval_loss,
            "first_losses": history.train_loss[:5],
            "held": evaluate_mlm(model, data.held_out),
            "new": evaluate_mlm(model, data.new_mask),
            "seconds": round(seconds, 1),
            "threads": torch.get_num_threads(),
        }

    return {
        "settings": s.to_log(),
        "unigram": data.unigram,
        "majority": data.majority,
        "runs": seed_runs("sharing", s.variants, s, train, progress),
    }


EXPERIMENT = Experiment("sharing", "4", SHARING, run_sharing)
