"""Lesson 2's exercise: DistilBERT's recipe on lesson 1's data (no stored weights; the exercise trains them).
A 4-layer teacher is pretrained with dynamic masking; each 2-layer student starts from the teacher's layers
0 and 2 (one in two, with its embeddings and MLM head) or from random weights, and trains with the triple
loss or with one of its terms dropped."""

from __future__ import annotations

from dataclasses import dataclass

from .common import Settings
from .masking import MASKING, MaskingData, tiny_config, train_run


@dataclass(frozen=True)
class DistilSettings(Settings):
    hidden: int
    heads: int
    dropout: float
    batch: int
    warmup: int
    eval_every: int
    teacher_layers: int
    teacher_steps: int
    teacher_lr: float
    teacher_seed: int
    layers: tuple  # the teacher's layers a student starts from
    steps: int
    lr: float
    temperature: float
    seeds: tuple
    arms: dict  # arm -> (start: "teacher" or "random", weight of L_ce, of L_mlm, of L_cos)


#: Lesson 2's exercise: the teacher and students described above; "no teacher" is the same small model trained
#: on the masked words alone.
DISTIL = DistilSettings(
    hidden=MASKING.hidden,
    heads=MASKING.heads,
    dropout=MASKING.dropout,
    batch=MASKING.batch,
    warmup=MASKING.warmup,
    eval_every=MASKING.eval_every,
    teacher_layers=4,
    teacher_steps=3000,
    teacher_lr=3e-3,
    teacher_seed=100,
    layers=(0, 2),
    steps=1000,
    lr=1e-3,
    temperature=2.0,
    seeds=(0, 1, 2),
    arms={
        "triple loss": ("teacher", 5.0, 2.0, 1.0),
        "without L_ce": ("teacher", 0.0, 2.0, 1.0),
        "without L_cos": ("teacher", 5.0, 2.0, 0.0),
        "without L_mlm": ("teacher", 5.0, 0.0, 1.0),
        "random init": ("random", 5.0, 2.0, 1.0),
        "no teacher": ("random", 0.0, 2.0, 0.0),
    },
)


def train_distil_teacher(data: MaskingData, steps: int | None = None, settings: DistilSettings = DISTIL):
    """Lesson 2's teacher (or its first ``steps``), dynamic masking: ``(model, history)``."""
    from bertfamily.pretraining import tiny_bert

    s = settings
    model = tiny_bert(tiny_config(data, s.teacher_layers, s), seed=s.teacher_seed)
    history, _ = train_run(
        data, model, "dynamic", s.teacher_seed, steps or s.teacher_steps, s, lr=s.teacher_lr, eval_every=250
    )
    return model, history


def distil_student(data: MaskingData, teacher, arm: str, seed: int = 0, settings: DistilSettings = DISTIL):
    """A fresh 2-layer student for ``arm``: the teacher's layers 0 and 2, or random weights."""
    from bertfamily.distillation import student_from_teacher
    from bertfamily.pretraining import tiny_bert

    if arm not in settings.arms:
        raise ValueError(f"arm must be one of {list(settings.arms)}, got {arm!r}")
    if settings.arms[arm][0] == "teacher":
        return student_from_teacher(teacher, settings.layers)
    return tiny_bert(tiny_config(data, len(settings.layers), settings), seed=seed)


def train_distil_run(data: MaskingData, teacher, arm: str, seed: int, steps: int, settings: DistilSettings = DISTIL):
    """One of lesson 2's student runs (or its first ``steps``): ``(student, history)``."""
    from bertfamily.distillation import mlm_triple_loss

    s = settings
    student = distil_student(data, teacher, arm, seed, s)
    _, alpha_ce, alpha_mlm, alpha_cos = s.arms[arm]
    loss = mlm_triple_loss(
        teacher, temperature=s.temperature, alpha_ce=alpha_ce, alpha_mlm=alpha_mlm, alpha_cos=alpha_cos
    )
    history, _ = train_run(data, student, "dynamic", seed, steps, s, loss=loss)
    return student, history
