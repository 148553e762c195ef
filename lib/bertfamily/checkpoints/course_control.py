"""Lesson 2's compute-matched control, Turc et al. (2019)'s question "distil, or train the small model longer?":
a model of the students' shape (2 layers) from random weights, trained with the course model's own
from-scratch recipe for the teacher's steps plus a student's, the budget that made the distilled student."""

from __future__ import annotations

import time

from .common import Experiment, load_into
from .course import COURSE, CourseData, CourseSettings, course_data, course_model, train_and_store
from .course_distil import COURSE_DISTIL, load_course_student
from .scores import blank_scores, right_answers

#: The course model's settings with the students' depth, for the teacher's steps plus a student's (3,600 + 300).
#: Its steps cost less than the teacher's (half the layers), so it is matched in steps and tokens seen.
COURSE_CONTROL = COURSE.replace(layers=len(COURSE_DISTIL.layers), steps=COURSE.steps + COURSE_DISTIL.steps)


def load_course_control(data: CourseData, settings: CourseSettings = COURSE_CONTROL):
    """Lesson 2's stored compute-matched control (see :data:`COURSE_CONTROL`), in eval mode."""
    return load_into(course_model(data, settings=settings), "course-control")


def run_course_control(progress, record, settings: CourseSettings = COURSE_CONTROL) -> dict:
    """:data:`COURSE_CONTROL`'s run. Weights stored after every evaluation (a run cut short leaves its last
    model); the log holds the validation curve, the test scores and each hidden test blank's right or wrong
    first guess, for it and for the stored distilled student (the pair an article-level interval compares)."""
    from bertfamily.models import count_parameters

    s = settings
    data = course_data()
    result, start = {"settings": s.to_log(), "blanks": data.held_out.targets}, time.perf_counter()

    def write(model, log):
        last = log["evaluations"][-1]
        result.update(parameters=count_parameters(model), evaluations=log["evaluations"], steps_done=last["step"])
        record(result)
        progress(
            f"control step {last['step']}: validation top-1 {100 * last['hidden']['top1']:.1f}% "
            f"({time.perf_counter() - start:.0f} s)"
        )

    model, log = train_and_store(data, s, "course-control", write)
    distilled = load_course_student(data, "distilled")
    result.update(
        final=blank_scores(model, data.held_out),
        final_validation=blank_scores(model, data.validation),
        right=right_answers(model, data.held_out),
        distilled_right=right_answers(distilled, data.held_out),
        epochs=log["epochs"],
        first_losses=log["train_loss"][:10],
        train_loss=[round(x, 4) for x in log["train_loss"]],
    )
    return result


EXPERIMENT = Experiment("course-control", "2", COURSE_CONTROL, run_course_control, native=True)
