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
"""
from __future__ import annotations

import copy
import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .features import mean_pool
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


# --------------------------------------------------------------------------- checks

def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a positive finite number (T > 0), got {temperature!r}")
    return float(temperature)


def _as_logits(logits, name: str = "logits") -> torch.Tensor:
    z = logits if isinstance(logits, torch.Tensor) else torch.tensor(logits, dtype=torch.float64)
    if not z.dtype.is_floating_point:
        z = z.to(torch.float32)
    if z.dim() == 0 or z.shape[-1] < 2:
        raise ValueError(f"{name} must have at least two classes on its last axis, got shape "
                         f"{tuple(z.shape)}")
    return z


def _same_shape(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{what}: student and teacher shapes must match, got {tuple(a.shape)} "
                         f"(student) and {tuple(b.shape)} (teacher)")


# --------------------------------------------------------------------------- the soft distribution

def soften(logits, temperature: float = 1.0) -> torch.Tensor:
    """Softmax of ``logits / temperature`` over the last axis; ``temperature`` must be > 0.

    T = 1 is the ordinary softmax; T > 1 flattens the distribution (towards uniform as T grows)
    without changing the order of the classes; T < 1 sharpens it.
    """
    T = _check_temperature(temperature)
    return torch.softmax(_as_logits(logits) / T, dim=-1)


def non_target_mass(probs, target=None) -> torch.Tensor:
    """Probability outside one class: the top class by default, or ``target`` (a class index per row).

    This is the share of the distribution that a one-hot label throws away.
    """
    p = _as_logits(probs, "probs")
    if target is None:
        top = p.max(dim=-1).values
    else:
        t = torch.as_tensor(target, dtype=torch.long)
        if t.shape != p.shape[:-1]:
            raise ValueError(f"target must hold one class index per distribution (shape "
                             f"{tuple(p.shape[:-1])}), got shape {tuple(t.shape)}")
        if t.numel() and (t.min() < 0 or t.max() >= p.shape[-1]):
            raise ValueError(f"target indices must be in [0, {p.shape[-1] - 1}]")
        top = p.gather(-1, t.unsqueeze(-1)).squeeze(-1)
    return 1 - top


def entropy(probs) -> torch.Tensor:
    """Shannon entropy in nats, ``-sum p log p`` over the last axis (0 log 0 taken as 0).

    Its maximum for K classes is ``log K`` (the uniform distribution).
    """
    p = _as_logits(probs, "probs")
    return -(p * torch.log(p.clamp(min=torch.finfo(p.dtype).tiny))).sum(-1)


# --------------------------------------------------------------------------- losses

def distillation_loss(student_logits, teacher_logits, temperature: float = 2.0) -> torch.Tensor:
    """Hinton et al.'s soft-target loss: ``T**2 * KL(softmax(teacher/T) || softmax(student/T))``.

    The KL divergence is averaged over the rows (every axis but the last). Why ``T**2``: the
    gradient of the softened cross-entropy with respect to a student logit is
    ``(q_i(T) - p_i(T)) / T``, and for large T the difference ``q_i - p_i`` itself shrinks like
    ``1/T`` (both distributions approach uniform), so the soft-target gradients scale as ``1/T**2``.
    Multiplying by ``T**2`` keeps their size roughly independent of the temperature, so that
    changing T does not silently re-weight this term against the hard-label term it is mixed with.
    The teacher is treated as a constant (no gradient flows into it).
    """
    T = _check_temperature(temperature)
    s, t = _as_logits(student_logits, "student_logits"), _as_logits(teacher_logits, "teacher_logits")
    _same_shape(s, t, "distillation_loss")
    s, t = s.reshape(-1, s.shape[-1]), t.detach().reshape(-1, t.shape[-1]).to(s.dtype)
    kl = F.kl_div(F.log_softmax(s / T, dim=-1), F.log_softmax(t / T, dim=-1),
                  reduction="batchmean", log_target=True)
    return kl * T * T


def cosine_loss(student_hidden, teacher_hidden, attention_mask=None) -> torch.Tensor:
    """DistilBERT's L_cos: mean of ``1 - cos(student, teacher)`` over the hidden-state vectors.

    Hidden states are (..., H); with an ``attention_mask`` of shape (...) only the positions where it
    is nonzero count (padding is ignored). The teacher is treated as a constant.
    """
    s = student_hidden
    t = teacher_hidden
    if not isinstance(s, torch.Tensor) or not isinstance(t, torch.Tensor):
        raise ValueError("cosine_loss takes two tensors of hidden states")
    _same_shape(s, t, "cosine_loss")
    if s.dim() < 2:
        raise ValueError(f"hidden states must be (..., H) with at least 2 axes, got {tuple(s.shape)}")
    cos = F.cosine_similarity(s, t.detach().to(s.dtype), dim=-1)
    if attention_mask is None:
        return (1 - cos).mean()
    mask = torch.as_tensor(attention_mask)
    if mask.shape != cos.shape:
        raise ValueError(f"attention_mask must have shape {tuple(cos.shape)} (the hidden states "
                         f"without their last axis), got {tuple(mask.shape)}")
    mask = mask.to(s.dtype)
    if mask.sum() <= 0:
        raise ValueError("attention_mask selects no position")
    return ((1 - cos) * mask).sum() / mask.sum()


def triple_loss(student_logits, teacher_logits, labels, student_hidden, teacher_hidden,
                attention_mask=None, temperature: float = 2.0, alpha_ce: float = 5.0,
                alpha_task: float = 2.0, alpha_cos: float = 1.0, ignore_index: int = -100):
    """DistilBERT's objective: ``alpha_ce * L_ce + alpha_task * L_task + alpha_cos * L_cos``.

    * L_ce: :func:`distillation_loss` between student and teacher logits at ``temperature``.
    * L_task: cross-entropy against the hard ``labels`` (DistilBERT: the masked tokens, with
      ``ignore_index`` on the unmasked positions; here: one class per example).
    * L_cos: :func:`cosine_loss` between the student's and the teacher's hidden states.

    The defaults are the weights of Hugging Face's distillation example (5, 2, 1) at T = 2.
    Returns ``(total, parts)`` with ``parts = {"ce": ..., "task": ..., "cos": ...}`` (detached floats).
    A term whose weight is 0 is not computed; the weights must be non-negative and not all zero.
    """
    weights = {"ce": alpha_ce, "task": alpha_task, "cos": alpha_cos}
    for name, w in weights.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise ValueError(f"alpha_{name} must be a non-negative finite number, got {w!r}")
    if not any(weights.values()):
        raise ValueError("the weights alpha_ce, alpha_task and alpha_cos are all zero: at least one "
                         "term must count")
    _check_temperature(temperature)
    parts, total = {}, 0.0
    if alpha_ce:
        parts["ce"] = distillation_loss(student_logits, teacher_logits, temperature)
    if alpha_task:
        logits = _as_logits(student_logits, "student_logits")
        y = torch.as_tensor(labels, dtype=torch.long)
        if y.shape != logits.shape[:-1]:
            raise ValueError(f"labels must have shape {tuple(logits.shape[:-1])} (one per row of "
                             f"logits), got {tuple(y.shape)}")
        parts["task"] = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                        ignore_index=ignore_index)
    if alpha_cos:
        parts["cos"] = cosine_loss(student_hidden, teacher_hidden, attention_mask)
    for name, value in parts.items():
        total = total + weights[name] * value
    return total, {k: float(v.detach()) for k, v in parts.items()}


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
            raise ValueError(f"soft targets must be (N, K) probabilities with N = {n}, got "
                             f"{tuple(y.shape)}")
        if (y < 0).any() or not torch.allclose(y.sum(-1), torch.ones(n, dtype=y.dtype), atol=1e-4):
            raise ValueError("soft targets must be probability rows (non-negative, summing to 1)")
    else:
        y = y.long()
        if y.shape != (n,):
            raise ValueError(f"hard targets must be one class index per example (shape ({n},)), "
                             f"got {tuple(y.shape)}")
        if num_classes is not None and n and (y.min() < 0 or y.max() >= num_classes):
            raise ValueError(f"class indices must be in [0, {num_classes - 1}]")
    return y, soft


def train_classifier(model: nn.Module, inputs: Sequence[torch.Tensor], targets, epochs: int = 30,
                     lr: float = 1e-2, batch_size: int = 32, temperature: float = 1.0,
                     weight_decay: float = 0.0, seed: int = 0) -> nn.Module:
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
        raise ValueError(f"every input must have the same, non-zero number of rows, got "
                         f"{[tuple(x.shape) for x in inputs]}")
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    T = _check_temperature(temperature)
    y, soft = _check_targets(targets, n, None)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    with one_thread():
        _fit(model, inputs, y, soft, T, epochs, batch_size, n, generator, optimiser)
    model.eval()
    return model


def _fit(model, inputs, y, soft, T, epochs, batch_size, n, generator, optimiser):
    for _ in range(epochs):
        # one batch of everything needs no shuffling (and no copy of the inputs)
        order = torch.randperm(n, generator=generator) if batch_size < n else None
        for i in range(0, n, batch_size):
            idx = slice(None) if order is None else order[i:i + batch_size]
            logits = model(*[x[idx] for x in inputs])
            if soft:
                loss = -(y[idx].to(logits.dtype) * F.log_softmax(logits / T, -1)).sum(-1).mean() * T * T
            else:
                loss = F.cross_entropy(logits, y[idx])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()


def train_linear_head(features: torch.Tensor, labels, num_classes: int | None = None,
                      epochs: int = 100, lr: float = 1e-2, weight_decay: float = 1e-4,
                      seed: int = 0) -> nn.Linear:
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
    with one_thread():
        for _ in range(epochs):
            loss = F.cross_entropy(head(x), y)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    head.eval()
    return head


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
