"""Knowledge distillation at the scale of a BERT: DistilBERT's student and its triple loss.

The losses (:func:`~bertfamily.losses.soften`, :func:`~bertfamily.losses.non_target_mass`,
:func:`~bertfamily.losses.entropy`, :func:`~bertfamily.losses.distillation_loss`, Hinton et al.'s soft-target
term, :func:`~bertfamily.losses.cosine_loss`, DistilBERT's L_cos, and :func:`~bertfamily.losses.triple_loss`,
DistilBERT's objective ``alpha_ce * L_ce + alpha_task * L_task + alpha_cos * L_cos``) live in
:mod:`bertfamily.losses`; the small models and the training loop of lesson 2's experiments
(``BagOfEmbeddings``, ``train_classifier``, ``train_linear_head``) in :mod:`bertfamily.heads`. Here:

* :func:`student_from_teacher` builds a shallower BERT from a deeper one by keeping one layer out of
  two, DistilBERT's initialisation.
* :func:`mlm_triple_loss` is DistilBERT's recipe on a masked-language model: a student ``BertForMaskedLM``
  trained on a frozen teacher's outputs at the masked words (``pretraining.train_mlm(..., loss=...)``
  runs it; lesson 2's runs are ``checkpoints.distil.train_distil_run``).
* :func:`first_guess`, :func:`accuracy` and :func:`mean_std`: the lesson's hard labels and its scores.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import nn

from .losses import check_triple_weights, triple_loss
from .masking import IGNORE_INDEX

__all__ = ["student_from_teacher", "first_guess", "mlm_triple_loss", "accuracy", "mean_std"]


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


def first_guess(logits: torch.Tensor) -> torch.Tensor:
    """Logits whose softmax puts all the mass on each row's top class (at any temperature up to 10**6):
    the teacher's first guess as a hard label, in the form :func:`distillation_loss` takes."""
    hard = torch.full_like(logits, -1e9)
    return hard.scatter(-1, logits.argmax(-1, keepdim=True), 0.0)


def mlm_triple_loss(teacher, *, temperature: float = 2.0,
                    alpha_ce: float = 5.0, alpha_mlm: float = 2.0,
                    alpha_cos: float = 1.0, targets: str = "soft"):
    """DistilBERT's triple loss for masked language modelling, as the ``loss`` of
    :func:`bertfamily.pretraining.train_mlm`: a student ``BertForMaskedLM`` learns from a frozen
    teacher ``BertForMaskedLM`` on the same masked batch.

    At the masked positions, L_ce compares the student's softened distribution over the vocabulary
    with the teacher's (:func:`distillation_loss` at ``temperature``) and L_mlm is the usual
    cross-entropy against the hidden word; L_cos pulls the student's last hidden states towards the
    teacher's at every position (:func:`cosine_loss`). A weight of 0 drops its term
    (``alpha_ce=0, alpha_cos=0`` is plain masked-LM training). The teacher runs in eval mode, without
    gradients. ``targets="first guess"`` replaces the teacher's distribution in L_ce by its first guess
    (:func:`first_guess`: all the mass on its top word), which keeps everything else and removes what the
    softness carries. Returns ``loss(student, input_ids, labels, attention_mask=None, **model_inputs)``
    giving ``(total, parts)``.
    """
    # checked now, not at the first step
    check_triple_weights(temperature, alpha_ce, alpha_mlm, alpha_cos)
    if targets not in ("soft", "first guess"):
        raise ValueError(
            f"targets must be 'soft' or 'first guess', got {targets!r}")
    if not (hasattr(teacher, "bert") and hasattr(teacher, "cls")):
        raise ValueError(f"the teacher must be a BertForMaskedLM (with "
                         f".bert and .cls), got {type(teacher).__name__}")
    teacher.eval()
    weights = dict(temperature=temperature, alpha_ce=alpha_ce,
                   alpha_task=alpha_mlm, alpha_cos=alpha_cos)

    def loss(student, input_ids, labels, attention_mask=None, **inputs):
        chosen = labels != IGNORE_INDEX
        inputs = dict(input_ids=input_ids, attention_mask=attention_mask,
                      **inputs)
        with torch.no_grad():
            t_hidden = teacher.bert(**inputs).last_hidden_state
            t_logits = teacher.cls(t_hidden[chosen])
            if targets == "first guess":
                t_logits = first_guess(t_logits)
        s_hidden = student.bert(**inputs).last_hidden_state
        s_logits = student.cls(s_hidden[chosen])
        return triple_loss(s_logits, t_logits, labels[chosen], s_hidden,
                           t_hidden, attention_mask=attention_mask,
                           **weights)
    return loss


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
