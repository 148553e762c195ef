"""Small classifiers trained on fixed inputs: the weak student and the linear heads of lesson 2's
experiments, and the one full-batch training loop that lesson 5's probes share
(:mod:`bertfamily.distillation` re-exports every name but :func:`fit_full_batch`).

* :class:`BagOfEmbeddings`: the mean of learned token vectors, then a linear layer.
* :func:`train_classifier`: mini-batch Adam on hard labels or soft targets.
* :func:`train_linear_head`: a linear classifier on frozen features, full-batch Adam.
* :func:`fit_full_batch`: the loop of :func:`train_linear_head` and ``transfer.train_probe``:
  cross-entropy on all rows, one optimiser step per epoch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .features import mean_pool
from .losses import check_temperature
from .timing import threads

__all__ = ["BagOfEmbeddings", "train_classifier", "train_linear_head", "fit_full_batch"]


class BagOfEmbeddings(nn.Module):
    """A weak student: the mean of learned token vectors (padding excluded), then a linear layer.

    It reads the same WordPiece ids as the teacher but ignores word order and context entirely.
    """

    def __init__(self, vocab_size: int, num_classes: int, dim: int = 64, pad_token_id: int = 0):
        super().__init__()
        for name, v in (("vocab_size", vocab_size), ("num_classes", num_classes), ("dim", dim)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if num_classes < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        self.pad_token_id = pad_token_id
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=pad_token_id)
        self.out = nn.Linear(dim, num_classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        if attention_mask is None:
            attention_mask = (input_ids != self.pad_token_id).long()
        return self.out(mean_pool(self.embed(input_ids), attention_mask))


def _check_targets(targets, n: int, num_classes: int | None) -> tuple[torch.Tensor, bool]:
    y = torch.as_tensor(targets)
    soft = y.dtype.is_floating_point
    if soft:
        if y.dim() != 2 or y.shape[0] != n:
            raise ValueError(f"soft targets must be (N, K) probabilities with N = {n}, got {tuple(y.shape)}")
        if (y < 0).any() or not torch.allclose(y.sum(-1), torch.ones(n, dtype=y.dtype), atol=1e-4):
            raise ValueError("soft targets must be probability rows (non-negative, summing to 1)")
    else:
        y = y.long()
        if y.shape != (n,):
            raise ValueError(f"hard targets must be one class index per example (shape ({n},)), got {tuple(y.shape)}")
        if num_classes is not None and n and (y.min() < 0 or y.max() >= num_classes):
            raise ValueError(f"class indices must be in [0, {num_classes - 1}]")
    return y, soft


def train_classifier(
    model: nn.Module,
    inputs: Sequence[torch.Tensor],
    targets,
    epochs: int = 30,
    lr: float = 1e-2,
    batch_size: int = 32,
    temperature: float = 1.0,
    weight_decay: float = 0.0,
    seed: int = 0,
) -> nn.Module:
    """Train ``model(*inputs)`` -> logits with Adam, on hard labels or on soft targets.

    * ``targets`` of integer dtype (N,): ordinary cross-entropy against those labels.
    * ``targets`` of float dtype (N, K): soft targets (e.g. a teacher's ``soften(logits, T)``); the
      loss is the cross-entropy between them and ``softmax(student / temperature)``, times ``T**2``
      (:func:`distillation_loss` up to a constant that does not depend on the student).

    Shuffling comes from ``seed``, so a run is reproducible. Returns the model, in eval mode.
    """
    inputs = [torch.as_tensor(x) for x in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
    n = inputs[0].shape[0]
    if n == 0 or any(x.shape[0] != n for x in inputs):
        raise ValueError(
            f"every input must have the same, non-zero number of rows, got {[tuple(x.shape) for x in inputs]}"
        )
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    T = check_temperature(temperature)
    y, soft = _check_targets(targets, n, None)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    with threads(1):
        _fit(model, inputs, y, soft, T, epochs, batch_size, n, generator, optimiser)
    model.eval()
    return model


def _fit(model, inputs, y, soft, T, epochs, batch_size, n, generator, optimiser):
    for _ in range(epochs):
        # one batch of everything needs no shuffling (and no copy of the inputs)
        order = torch.randperm(n, generator=generator) if batch_size < n else None
        for i in range(0, n, batch_size):
            idx = slice(None) if order is None else order[i : i + batch_size]
            logits = model(*[x[idx] for x in inputs])
            if soft:
                loss = -(y[idx].to(logits.dtype) * F.log_softmax(logits / T, -1)).sum(-1).mean() * T * T
            else:
                loss = F.cross_entropy(logits, y[idx])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()


def train_linear_head(
    features: torch.Tensor,
    labels,
    num_classes: int | None = None,
    epochs: int = 100,
    lr: float = 1e-2,
    weight_decay: float = 1e-4,
    seed: int = 0,
) -> nn.Linear:
    """A linear classifier on fixed features (a frozen encoder's pooled output), full-batch Adam.

    The features are used as given (no standardisation), and ``torch.manual_seed(seed)`` fixes the
    initial weights, so a run is deterministic.
    """
    x = torch.as_tensor(features, dtype=torch.float32)
    if x.dim() != 2:
        raise ValueError(f"features must be (N, H), got {tuple(x.shape)}")
    y, soft = _check_targets(labels, x.shape[0], num_classes)
    if soft:
        raise ValueError("train_linear_head takes hard labels (integer class indices)")
    k = num_classes or int(y.max()) + 1
    torch.manual_seed(seed)
    head = nn.Linear(x.shape[1], k)
    optimiser = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
    with threads(1):
        fit_full_batch(head, x, y, optimiser, epochs)
    head.eval()
    return head


def fit_full_batch(model: nn.Module, x: torch.Tensor, y: torch.Tensor, optimiser, epochs: int) -> None:
    """``epochs`` optimiser steps on the cross-entropy of ``model(x)`` against ``y`` (all rows at once)."""
    for _ in range(epochs):
        loss = F.cross_entropy(model(x), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
