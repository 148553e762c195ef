"""Knowledge distillation: what a softened distribution carries, and DistilBERT's triple loss.

* :func:`soften` is the softmax with a temperature, ``p_i(T) = exp(z_i / T) / sum_j exp(z_j / T)``;
  :func:`non_target_mass` and :func:`entropy` measure how much a distribution says beyond its top
  class.
* :func:`distillation_loss` is Hinton et al.'s soft-target term: the KL divergence from the softened
  teacher to the softened student, multiplied by ``T**2``.
* :func:`cosine_loss` pulls the student's hidden states towards the teacher's (DistilBERT's L_cos).
* :func:`triple_loss` is DistilBERT's objective: ``alpha_ce * L_ce + alpha_task * L_task +
  alpha_cos * L_cos``, where L_task is the ordinary cross-entropy against hard labels (masked
  language modelling in DistilBERT, a classification label in this course's small version).
* :func:`student_from_teacher` builds a shallower BERT from a deeper one by keeping one layer out of
  two, DistilBERT's initialisation.
* :class:`PooledClassifier`, :func:`reinitialise_layers`, :func:`distil` and :func:`predict` run
  DistilBERT's recipe at notebook scale: a student encoder with a classification head, trained on a
  teacher's outputs with :func:`triple_loss` (or any one of its terms).
* :class:`BagOfEmbeddings`, :func:`train_classifier`, :func:`train_linear_head` and
  :func:`accuracy` are the small models and the training loop of the lesson's experiments.

The losses live in :mod:`bertfamily.losses` and the small heads in :mod:`bertfamily.heads`; every
name is importable from here, as the lesson imports it.
"""
from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

from .features import mean_pool
from .heads import BagOfEmbeddings, _check_targets, _fit, train_classifier, train_linear_head  # noqa: F401
from .losses import (  # noqa: F401 (the lesson reads them as distillation.*)
    _as_logits,
    _check_temperature,
    _same_shape,
    cosine_loss,
    distillation_loss,
    entropy,
    non_target_mass,
    soften,
    triple_loss,
)
from .timing import threads

__all__ = ["soften", "non_target_mass", "entropy", "distillation_loss", "cosine_loss",
           "triple_loss", "student_from_teacher", "PooledClassifier", "reinitialise_layers", "distil",
           "predict", "BagOfEmbeddings", "train_classifier",
           "train_linear_head", "accuracy", "mean_std", "one_thread"]


def one_thread():
    """Run the enclosed torch code on one CPU thread, then restore the previous setting.

    The lesson's students are tiny (a few thousand weights): splitting each small matrix product
    across threads costs more in synchronisation than it saves, badly so on a busy machine.
    """
    return threads(1)


# --------------------------------------------------------------------------- students

def _layer_owner(model, caller: str):
    """The module of a BERT-style ``model`` that holds ``.encoder.layer``: the model itself, or its
    ``.base_model`` / ``.bert`` (``BertForMaskedLM`` and the like)."""
    owner = model if hasattr(model, "encoder") else (getattr(model, "base_model", None)
                                                     or getattr(model, "bert", None))
    if owner is None or not hasattr(owner, "encoder") or not hasattr(owner.encoder, "layer"):
        raise ValueError(f"{caller} needs a BERT-style model with .encoder.layer "
                         f"(e.g. transformers.BertModel), got {type(model).__name__}")
    return owner


def student_from_teacher(teacher, layers: Sequence[int] | None = None):
    """A copy of a BERT-style ``teacher`` that keeps only some of its layers (default: one in two).

    DistilBERT initialised its 6-layer student from BERT-base's 12 layers by taking one layer out of
    two; ``layers=None`` keeps layers 0, 2, 4, ... of the teacher. The embeddings (and any head) are
    copied; the teacher is not modified. Works for any model with ``.encoder.layer`` (``BertModel``)
    or a ``.bert`` / ``.base_model`` holding one.
    """
    depth = len(_layer_owner(teacher, "student_from_teacher").encoder.layer)
    keep = list(range(0, depth, 2)) if layers is None else [int(i) for i in layers]
    if not keep:
        raise ValueError("layers must name at least one teacher layer")
    if any(i < 0 or i >= depth for i in keep):
        raise ValueError(f"layer indices must be in [0, {depth - 1}] for this {depth}-layer "
                         f"teacher, got {list(layers)}")
    if len(set(keep)) != len(keep):
        raise ValueError(f"layer indices must be distinct, got {list(layers)}")
    student = copy.deepcopy(teacher)
    owner = _layer_owner(student, "student_from_teacher")
    owner.encoder.layer = nn.ModuleList([owner.encoder.layer[i] for i in keep])
    for module in (student, owner):
        if hasattr(module, "config"):
            module.config.num_hidden_layers = len(keep)
    for new_index, layer in enumerate(owner.encoder.layer):  # transformers caches use layer_idx
        for sub in layer.modules():
            if hasattr(sub, "layer_idx"):
                sub.layer_idx = new_index
    student.bertfamily_kept_layers = keep
    return student


class PooledClassifier(nn.Module):
    """An encoder, mean-pooled over the real tokens, then a linear head.

    ``forward(inputs, attention_mask)`` returns ``(logits, pooled)``: the logits for the
    distillation and task terms of :func:`triple_loss`, the pooled vector for its cosine term. The
    head is a copy of ``head`` (so a teacher's head can start the student without being trained
    along with it).

    ``inputs`` are token ids (N, L), or, with ``skip_layers = k``, the hidden states (N, L, H) that
    come out of the encoder's first ``k`` layers, computed once beforehand (for instance by the
    teacher's pass, :func:`bertfamily.features.encode` with ``keep_layer=k``, when those layers are
    the teacher's and stay frozen). Then only the layers above them run: the same result as the
    whole encoder on the ids, for a fraction of the cost.
    """

    def __init__(self, encoder: nn.Module, head: nn.Linear, skip_layers: int = 0):
        super().__init__()
        if not isinstance(head, nn.Linear):
            raise ValueError(f"head must be a torch.nn.Linear, got {type(head).__name__}")
        depth = len(encoder.encoder.layer) if hasattr(encoder, "encoder") else None
        if isinstance(skip_layers, bool) or not isinstance(skip_layers, int) or skip_layers < 0 \
                or (depth is not None and skip_layers >= depth):
            raise ValueError(f"skip_layers must be an integer in [0, {depth - 1 if depth else 0}] "
                             f"(at least one layer must run), got {skip_layers!r}")
        self.encoder = encoder
        self.head = copy.deepcopy(head)
        self.skip_layers = skip_layers

    def forward(self, inputs: torch.Tensor, attention_mask: torch.Tensor):
        if self.skip_layers:
            if not inputs.is_floating_point() or inputs.dim() != 3:
                raise ValueError(f"with skip_layers={self.skip_layers} the inputs are the hidden "
                                 f"states (N, L, H) after that many layers, got {tuple(inputs.shape)} "
                                 f"{inputs.dtype}")
            from transformers.masking_utils import create_bidirectional_mask

            mask = create_bidirectional_mask(config=self.encoder.config, inputs_embeds=inputs,
                                             attention_mask=attention_mask)
            hidden = inputs
            for layer in self.encoder.encoder.layer[self.skip_layers:]:
                out = layer(hidden, mask)
                hidden = out[0] if isinstance(out, tuple) else out
        else:
            hidden = self.encoder(input_ids=inputs, attention_mask=attention_mask).last_hidden_state
        if hidden.shape[-1] != self.head.in_features:
            raise ValueError(f"the encoder's hidden size {hidden.shape[-1]} does not match the "
                             f"head's input size {self.head.in_features}")
        pooled = mean_pool(hidden, attention_mask)
        return self.head(pooled), pooled


def reinitialise_layers(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give the transformer layers of a BERT-style ``model`` fresh random weights, in place.

    BERT's initialisation: linear weights from N(0, ``initializer_range``) (0.02 unless the config
    says otherwise), biases 0, LayerNorm weight 1 and bias 0. Only ``.encoder.layer`` changes; the
    embeddings keep their weights. This is the "random initialisation" arm of DistilBERT's ablation,
    applied to the layers. Returns ``model``.
    """
    owner = _layer_owner(model, "reinitialise_layers")
    std = float(getattr(getattr(model, "config", None), "initializer_range", 0.02))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in owner.encoder.layer.modules():
            if isinstance(module, nn.Linear):
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
    return model


def _check_mask(inputs: torch.Tensor, attention_mask: torch.Tensor) -> None:
    if attention_mask.shape != inputs.shape[:2]:
        raise ValueError(f"attention_mask must be (N, L) like the inputs {tuple(inputs.shape[:2])}, "
                         f"got {tuple(attention_mask.shape)}")


def distil(student: nn.Module, inputs: torch.Tensor, attention_mask: torch.Tensor,
           teacher_logits: torch.Tensor, teacher_pooled: torch.Tensor, steps: int,
           batch_size: int = 16, lr: float = 2e-4, temperature: float = 2.0,
           alpha_ce: float = 5.0, alpha_task: float = 2.0, alpha_cos: float = 1.0, seed: int = 0,
           progress: bool = False) -> list[dict]:
    """Train ``student`` (a :class:`PooledClassifier`) on a teacher's outputs with :func:`triple_loss`.

    Each of ``steps`` steps draws ``batch_size`` rows (with replacement, from a generator seeded by
    ``seed``) of the transfer set ``inputs`` / ``attention_mask`` (token ids, or the hidden states
    a student with ``skip_layers`` reads), and matches the student to the
    teacher's ``teacher_logits`` (soft targets at ``temperature``, L_ce), to their arg-max (hard
    labels, L_task) and to the teacher's pooled vectors ``teacher_pooled`` (L_cos), weighted by the
    three ``alpha_*`` (a weight of 0 drops its term: ``alpha_ce=0, alpha_cos=0`` is training on the
    teacher's hard labels alone). Only parameters with ``requires_grad`` are trained (AdamW).
    Returns the per-step loss terms; the student is left in eval mode.
    """
    n = inputs.shape[0]
    _check_mask(inputs, attention_mask)
    for name, t in (("teacher_logits", teacher_logits), ("teacher_pooled", teacher_pooled)):
        if t.dim() != 2 or t.shape[0] != n:
            raise ValueError(f"{name} must have one row per example ({n}), got {tuple(t.shape)}")
    for name, v in (("steps", steps), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    params = [p for p in student.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the student has no trainable parameter (every requires_grad is False)")
    from tqdm.auto import tqdm

    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # dropout
    optimiser = torch.optim.AdamW(params, lr=lr)
    hard = teacher_logits.argmax(-1)
    history = []
    student.train()
    for _ in tqdm(range(steps), desc="distil", disable=not progress, leave=False):
        rows = torch.randint(n, (batch_size,), generator=generator)
        logits, pooled = student(inputs[rows], attention_mask[rows])
        loss, parts = triple_loss(logits, teacher_logits[rows], hard[rows], pooled,
                                  teacher_pooled[rows], temperature=temperature, alpha_ce=alpha_ce,
                                  alpha_task=alpha_task, alpha_cos=alpha_cos)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        history.append({"loss": float(loss.detach()), **parts})
    student.eval()
    return history


@torch.no_grad()
def predict(model: nn.Module, inputs: torch.Tensor, attention_mask: torch.Tensor,
            batch_size: int = 128, output: str = "logits") -> torch.Tensor:
    """A :class:`PooledClassifier`'s ``output`` ("logits" or "pooled") for every row, in batches."""
    if output not in ("logits", "pooled"):
        raise ValueError(f'output must be "logits" or "pooled", got {output!r}')
    _check_mask(inputs, attention_mask)
    was_training = model.training
    model.eval()
    out = []
    for i in range(0, inputs.shape[0], batch_size):
        logits, pooled = model(inputs[i:i + batch_size], attention_mask[i:i + batch_size])
        out.append(logits if output == "logits" else pooled)
    model.train(was_training)
    return torch.cat(out)


@torch.no_grad()
def accuracy(logits, labels) -> float:
    """Share of rows whose arg-max is the label."""
    z = torch.as_tensor(logits)
    y = torch.as_tensor(labels, dtype=torch.long)
    if z.dim() != 2 or y.shape != (z.shape[0],):
        raise ValueError(f"need logits (N, K) and labels (N,), got {tuple(z.shape)} and {tuple(y.shape)}")
    return float((z.argmax(-1) == y).float().mean())


def mean_std(values) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value) of a list of numbers."""
    v = torch.as_tensor(list(values), dtype=torch.float64)
    if v.numel() == 0:
        raise ValueError("mean_std needs at least one value")
    return float(v.mean()), float(v.std()) if v.numel() > 1 else 0.0
