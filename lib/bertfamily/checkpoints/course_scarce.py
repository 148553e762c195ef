"""Lesson 2's second experiment, Hinton et al.'s section 6 at the course's scale: the students of
:data:`~bertfamily.checkpoints.course_distil.COURSE_DISTIL` trained on a small share of the training articles
(``fraction``, drawn once with ``articles_seed``; the share was fixed before any test blank was scored), long
enough for the hard-label student to overfit, evaluated on the validation blanks every ``eval_every`` steps.
Every arm starts from the teacher's layers 0 and 2 and sees the same masked blocks in the same order for a seed:

* ``hard labels``: the masked words alone (L_mlm);
* ``distilled``: the triple loss, the teacher's soft distribution at T = 2 (L_ce), the masked words (L_mlm)
  and its hidden states (L_cos), as in ``COURSE_DISTIL``;
* ``first guesses``: the same triple loss with the teacher's distribution replaced by its first guess
  (:func:`bertfamily.distillation.first_guess`): what the softness adds is ``distilled`` minus this.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from .common import Experiment
from .course import CourseData, course_data, load_course_model
from .course_distil import COURSE_DISTIL, CourseDistilSettings, distil_course_model
from .scores import blank_scores, right_answers


@dataclass(frozen=True)
class CourseScarceSettings(CourseDistilSettings):
    fraction: float  # the share of the training articles
    articles_seed: int  # draws them
    jobs: tuple  # (arm, seed) in the order they run


#: The runs go seed by seed (``jobs``), so a run cut short leaves pairs. A quarter of ``COURSE_DISTIL``'s batch
#: (the share holds 145 blocks: four steps an epoch), for the two cores' time; 200 steps are 50 epochs.
COURSE_SCARCE = CourseScarceSettings(
    **{
        **asdict(COURSE_DISTIL),
        "batch": 32,
        "steps": 200,
        "eval_every": 20,
        "arms": {
            "hard labels": ("teacher", (0.0, 1.0, 0.0)),
            "distilled": ("teacher", (5.0, 2.0, 1.0)),
            "first guesses": ("teacher", (5.0, 2.0, 1.0), "first guess"),
        },
    },
    fraction=0.03,
    articles_seed=0,
    jobs=(
        ("hard labels", 0),
        ("distilled", 0),
        ("hard labels", 1),
        ("distilled", 1),
        ("first guesses", 0),
        ("hard labels", 2),
        ("distilled", 2),
    ),
)


def scarce_articles(data: CourseData, settings: CourseScarceSettings = COURSE_SCARCE) -> torch.Tensor:
    """The indices of the training articles in the scarce share, sorted: ``round(fraction * articles)`` of them,
    drawn with a generator seeded ``articles_seed``."""
    s = settings
    if not 0 < s.fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {s.fraction}")
    count = max(1, round(s.fraction * data.articles))
    chosen = torch.randperm(data.articles, generator=torch.Generator().manual_seed(s.articles_seed))[:count]
    return chosen.sort().values


def scarce_data(data: CourseData, settings: CourseScarceSettings = COURSE_SCARCE) -> CourseData:
    """``data`` with only the training blocks of :func:`scarce_articles` (the evaluation sets unchanged)."""
    import dataclasses

    of_block = data.train_articles
    if of_block is None or len(of_block) != data.train.shape[0]:
        known = "no article" if of_block is None else f"the articles of {len(of_block)} blocks"
        raise ValueError(f"{known} for {data.train.shape[0]} training blocks: the data are not course_data()'s")
    chosen = scarce_articles(data, settings)
    kept = torch.isin(of_block, chosen)
    train = data.train[kept]
    return dataclasses.replace(
        data,
        train=train,
        articles=len(chosen),
        counts=torch.bincount(train.flatten(), minlength=data.counts.numel()),
        train_articles=of_block[kept],
    )


def train_scarce_run(
    data: CourseData,
    teacher,
    arm: str,
    seed: int,
    steps: int | None = None,
    settings: CourseScarceSettings = COURSE_SCARCE,
    progress=True,
    on_evaluation=None,
    evaluate: bool = True,
):
    """One run of :data:`COURSE_SCARCE` on ``data`` (already :func:`scarce_data`): ``(student, log, best)``,
    where ``best`` is the student's state at its best validation top-1 (the early-stopped model)."""
    import copy

    s = settings.replace(seed=seed)
    best = {"top1": -1.0, "state": None, "step": None}

    def after(model, log):
        last = log["evaluations"][-1]
        if last["hidden"]["top1"] > best["top1"]:
            best.update(top1=last["hidden"]["top1"], step=last["step"], state=copy.deepcopy(model.state_dict()))
        if on_evaluation is not None:
            on_evaluation(model, log)

    student, log = distil_course_model(data, teacher, arm, steps, s, progress, after if evaluate else None, evaluate)
    return student, log, best


def run_course_scarce(progress, record, settings: CourseScarceSettings = COURSE_SCARCE) -> dict:
    """:data:`COURSE_SCARCE`'s runs, seed by seed. The log is rewritten after every evaluation (``done`` lists
    the finished runs); per run it holds the validation curve, the test scores of the last step and of the best
    validation step, and each hidden test blank's right (1) or wrong (0) first guess at both (for intervals by
    article). No weights are stored."""
    s = settings
    full = course_data()
    data = scarce_data(full, s)
    teacher = load_course_model(full)
    result = {
        "settings": s.to_log(),
        "articles": scarce_articles(full, s).tolist(),
        "train_articles": full.articles,
        "train_blocks": int(data.train.shape[0]),
        "blanks": full.held_out.targets,
        "validation_blanks": full.validation.targets,
        "runs": {arm: [] for arm in s.arms},
        "done": [],
    }
    start = time.perf_counter()
    for arm, seed in s.jobs:
        begun, run = time.perf_counter(), {"seed": seed}
        result["runs"][arm].append(run)

        def write(model, log, run=run, begun=begun, arm=arm):
            last = log["evaluations"][-1]
            run.update(
                evaluations=log["evaluations"], steps_done=last["step"], seconds=round(time.perf_counter() - begun, 1)
            )
            record(result)
            progress(
                f"{arm} seed {run['seed']} step {last['step']}: validation top-1 "
                f"{100 * last['hidden']['top1']:.1f}% ({time.perf_counter() - start:.0f} s)"
            )

        student, log, best = train_scarce_run(data, teacher, arm, seed, settings=s, progress=False, on_evaluation=write)
        run.update(test_last=blank_scores(student, full.held_out), right_last=right_answers(student, full.held_out))
        student.load_state_dict(best["state"])
        run.update(
            best_step=best["step"],
            test_best=blank_scores(student, full.held_out),
            right_best=right_answers(student, full.held_out),
            first_losses=log["train_loss"][:5],
            epochs=log["epochs"],
            train_loss=[round(x, 4) for x in log["train_loss"]],
            seconds=round(time.perf_counter() - begun, 1),
        )
        result["done"].append([arm, seed])
        record(result)
        progress(
            f"{arm} seed {seed}: test top-1 {100 * run['test_best']['hidden']['top1']:.1f}% at its best step "
            f"{best['step']}, {100 * run['test_last']['hidden']['top1']:.1f}% at the last"
        )
    return result


EXPERIMENT = Experiment("course-scarce", "2", COURSE_SCARCE, run_course_scarce, native=True)
