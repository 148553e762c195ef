"""Lesson 2 at the course's scale: the course model (the teacher, as stored) and three students with half its
layers, trained the same number of steps each on the same masked batches in the same order, with the same
schedule:

* ``distilled``: DistilBERT's recipe, the teacher's layers 0 and 2 (with its embeddings and head) trained with
  the triple loss (weights L_ce, L_mlm, L_cos);
* ``hard labels``: the same start, trained on the masked words alone (L_mlm): what the teacher's soft
  distribution and hidden states add is ``distilled`` minus this;
* ``random init``: the same 2-layer shape from random weights, trained on the masked words alone: what the
  teacher's layers as a start add is ``hard labels`` minus this.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .common import Experiment, Settings, halve, load_into, save
from .course import COURSE, CourseData, course_data, course_loop, course_model, load_course_model
from .scores import blank_scores


@dataclass(frozen=True)
class CourseDistilSettings(Settings):
    layers: tuple  # the teacher's layers a student starts from
    steps: int
    batch: int
    lr: float
    warmup: int
    decay: float  # the learning rate's shape, as the course model's (course.learning_rate)
    final_lr_fraction: float
    temperature: float
    eval_every: int
    seed: int  # the masks and the batch order
    autocast: str | None
    arms: dict  # arm -> (start: "teacher" or "random", (L_ce, L_mlm, L_cos)[, targets])


COURSE_DISTIL = CourseDistilSettings(
    layers=(0, 2),
    steps=300,
    batch=128,
    lr=5e-4,
    warmup=40,
    decay=0.5,
    final_lr_fraction=0.1,
    temperature=2.0,
    eval_every=100,
    seed=0,
    autocast="bfloat16",
    arms={
        "distilled": ("teacher", (5.0, 2.0, 1.0)),
        "hard labels": ("teacher", (0.0, 1.0, 0.0)),
        "random init": ("random", (0.0, 1.0, 0.0)),
    },
)


def check_arm(arm: str, settings) -> None:
    if arm not in settings.arms:
        raise ValueError(f"arm must be one of {list(settings.arms)}, got {arm!r}")


def course_student(data: CourseData, teacher, arm: str = "distilled", settings: CourseDistilSettings = COURSE_DISTIL):
    """A student of ``arm`` before training: the teacher's layers ``settings.layers``, or random weights."""
    from bertfamily.distillation import student_from_teacher

    check_arm(arm, settings)
    if settings.arms[arm][0] == "teacher":
        return student_from_teacher(teacher, settings.layers)
    return course_model(data, settings=COURSE.replace(layers=len(settings.layers)))


def distil_course_model(
    data: CourseData,
    teacher,
    arm: str,
    steps: int | None = None,
    settings: CourseDistilSettings = COURSE_DISTIL,
    progress=True,
    on_evaluation=None,
    evaluate: bool = True,
):
    """Train the student of ``arm`` (see :data:`COURSE_DISTIL`): ``(student, log)``.

    Every arm sees the same masked batches in the same order (the masking and order draw from a generator
    seeded ``settings.seed``), with the learning-rate shape of :func:`~bertfamily.checkpoints.course.learning_rate`.
    ``log`` holds each step's loss and, every ``eval_every`` steps (and at step 0), ``blank_scores`` on the
    validation blanks (``evaluate=False``: the losses only).
    """
    from bertfamily.distillation import mlm_triple_loss

    s = settings
    steps = steps or s.steps
    student = course_student(data, teacher, arm, s)
    alpha_ce, alpha_mlm, alpha_cos = s.arms[arm][1]
    targets = s.arms[arm][2] if len(s.arms[arm]) > 2 else "soft"
    loss = (
        None
        if alpha_ce == alpha_cos == 0 and alpha_mlm == 1
        else mlm_triple_loss(  # no teacher: plain MLM
            teacher,
            temperature=s.temperature,
            alpha_ce=alpha_ce,
            alpha_mlm=alpha_mlm,
            alpha_cos=alpha_cos,
            targets=targets,
        )
    )
    log = {"train_loss": [], "evaluations": [{"step": 0, **blank_scores(student, data.validation)}] if evaluate else []}
    log = course_loop(data, student, s, steps, log, arm, progress, on_evaluation, loss=loss, evaluate=evaluate)
    student.eval()
    return student, log


def load_course_student(data: CourseData, arm: str, settings: CourseDistilSettings = COURSE_DISTIL):
    """Lesson 2's stored student of ``arm`` (see :data:`COURSE_DISTIL`), in eval mode."""
    check_arm(arm, settings)
    model = course_model(data, settings=COURSE.replace(layers=len(settings.layers)))
    return load_into(model, "course-student-" + arm.replace(" ", "-"))


def run_course_distil(progress, record, settings: CourseDistilSettings = COURSE_DISTIL) -> dict:
    """The stored course model and the three students of :data:`COURSE_DISTIL`. The log is rewritten after every
    evaluation, so a run cut short says how far it got."""
    from bertfamily.models import count_parameters

    s = settings
    data = course_data()
    teacher = load_course_model(data)
    result = {
        "settings": s.to_log(),
        "blanks": data.held_out.targets,
        "teacher": {"parameters": count_parameters(teacher), **blank_scores(teacher, data.held_out)},
        "runs": {},
    }
    start = time.perf_counter()
    for arm in s.arms:
        begun, name = time.perf_counter(), "course-student-" + arm.replace(" ", "-")

        def write(model, log, arm=arm, begun=begun, name=name):
            save(model, name)
            last = log["evaluations"][-1]
            result["runs"][arm] = {
                "parameters": count_parameters(model),
                "evaluations": log["evaluations"],
                "steps_done": last["step"],
                "seconds": round(time.perf_counter() - begun, 1),
            }
            record(result)
            progress(
                f"{arm} step {last['step']}: validation top-1 {100 * last['hidden']['top1']:.1f}%, "
                f"top-5 {100 * last['hidden']['top5']:.1f}% ({time.perf_counter() - start:.0f} s)"
            )

        student, log = distil_course_model(data, teacher, arm, settings=s, on_evaluation=write)
        halve(student)  # the metrics of the weights as stored
        save(student, name)
        result["runs"][arm].update(
            final=blank_scores(student, data.held_out),
            final_validation=blank_scores(student, data.validation),
            first_losses=log["train_loss"][:5],
            epochs=log["epochs"],
            train_loss=[round(x, 4) for x in log["train_loss"]],
        )
        record(result)
    return result


EXPERIMENT = Experiment("course-distil", "2, 3", COURSE_DISTIL, run_course_distil, native=True)
