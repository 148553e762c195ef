"""The losses of knowledge distillation: a softened distribution and what it carries, Hinton et al.'s
soft-target loss, DistilBERT's cosine loss and triple loss (lesson 2; :mod:`bertfamily.distillation`
re-exports every name).

* :func:`soften` is the softmax with a temperature, ``p_i(T) = exp(z_i / T) / sum_j exp(z_j / T)``;
  :func:`non_target_mass` and :func:`entropy` measure how much a distribution says beyond its top
  class.
* :func:`distillation_loss` is Hinton et al.'s soft-target term: the KL divergence from the softened
  teacher to the softened student, multiplied by ``T**2``.
* :func:`cosine_loss` pulls the student's hidden states towards the teacher's (DistilBERT's L_cos).
* :func:`triple_loss` is DistilBERT's objective: ``alpha_ce * L_ce + alpha_task * L_task +
  alpha_cos * L_cos``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["check_temperature", "soften", "non_target_mass", "entropy", "distillation_loss", "cosine_loss",
           "triple_loss"]


# --------------------------------------------------------------------------- checks

def check_temperature(temperature) -> float:
    """``temperature`` as a float when it is a positive finite number; otherwise a ValueError."""
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
    T = check_temperature(temperature)
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
            raise ValueError(f"target must hold one class index per "
                             f"distribution (shape "
                             f"{tuple(p.shape[:-1])}), got shape "
                             f"{tuple(t.shape)}")
        if t.numel() and (t.min() < 0 or t.max() >= p.shape[-1]):
            raise ValueError(f"target indices must be in "
                             f"[0, {p.shape[-1] - 1}]")
        top = p.gather(-1, t.unsqueeze(-1)).squeeze(-1)
    return 1 - top


def entropy(probs) -> torch.Tensor:
    """Shannon entropy in nats, ``-sum p log p`` over the last axis (0 log 0 taken as 0).

    Its maximum for K classes is ``log K`` (the uniform distribution).
    """
    p = _as_logits(probs, "probs")
    return -(p * torch.log(p.clamp(min=torch.finfo(p.dtype).tiny))).sum(-1)


# --------------------------------------------------------------------------- losses

def distillation_loss(student_logits, teacher_logits,
                      temperature: float = 2.0) -> torch.Tensor:
    """Hinton et al.'s soft-target loss: ``T**2 * KL(softmax(teacher/T) || softmax(student/T))``.

    The KL divergence is averaged over the rows (every axis but the last). Why ``T**2``: the
    gradient of the softened cross-entropy with respect to a student logit is
    ``(q_i(T) - p_i(T)) / T``, and for large T the difference ``q_i - p_i`` itself shrinks like
    ``1/T`` (both distributions approach uniform), so the soft-target gradients scale as ``1/T**2``.
    Multiplying by ``T**2`` keeps their size roughly independent of the temperature, so that
    changing T does not silently re-weight this term against the hard-label term it is mixed with.
    The teacher is treated as a constant (no gradient flows into it).
    """
    T = check_temperature(temperature)
    s = _as_logits(student_logits, "student_logits")
    t = _as_logits(teacher_logits, "teacher_logits")
    _same_shape(s, t, "distillation_loss")
    s = s.reshape(-1, s.shape[-1])
    t = t.detach().reshape(-1, t.shape[-1]).to(s.dtype)
    log_s = F.log_softmax(s / T, dim=-1)
    log_t = F.log_softmax(t / T, dim=-1)
    kl = F.kl_div(log_s, log_t, reduction="batchmean", log_target=True)
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


def check_triple_weights(temperature, alpha_ce, alpha_task, alpha_cos) -> dict:
    """The weights of :func:`triple_loss` as ``{"ce": ..., "task": ..., "cos": ...}``, once checked:
    non-negative finite numbers, not all zero, and a valid ``temperature``."""
    weights = {"ce": alpha_ce, "task": alpha_task, "cos": alpha_cos}
    for name, w in weights.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise ValueError(f"alpha_{name} must be a non-negative finite number, got {w!r}")
    if not any(weights.values()):
        raise ValueError("the weights alpha_ce, alpha_task and alpha_cos are all zero: at least one "
                         "term must count")
    check_temperature(temperature)
    return weights


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
    weights = check_triple_weights(temperature, alpha_ce, alpha_task, alpha_cos)
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
