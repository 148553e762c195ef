"""The course's small pretrained checkpoints: how they are made, and loading them back.

Lessons 1, 2, 3, 4 and 6 need models trained longer than a lesson may run (60 s on 2 cores). Each
experiment is a module of this package, with its settings (a frozen dataclass), its data, one run,
loading the stored weights back, and ``run_...``, which ``make pretrain`` (``python -m tools.pretrain``)
calls through :data:`EXPERIMENTS`:

* ``masking`` (lesson 1): a tiny BERT under each masking schedule, three seeds each;
* ``tlm`` (lesson 6): MLM, TLM and the two in turn (XLM's recipe) on parallel sentences;
* ``sharing`` (lesson 4): four layers of their own or one layer shared, on lesson 1's data;
* ``course`` (lessons 1, 2, 3): the course's own BERT (and lesson 1's showcase blanks, ``showcases``);
* ``course_distil``, ``course_scarce``, ``course_control`` (lessons 2, 3): its 2-layer students, on all the
  articles and on 3% of them, and the same shape trained from random weights for the same budget;

and ``distil``, lesson 2's exercise on lesson 1's data (no stored weights). ``common`` holds what they share.
Into ``checkpoints/`` (package data, so Colab has them too) go, per experiment, ``<name>.json``: the settings,
the machine, and per run its evaluation curve and final metrics; and the weights, stored as float16 (half the
bytes; the metrics in the log are those of the stored weights, so a live evaluation reproduces them).

The lessons rebuild the same data (:func:`masking_data`, :func:`course_data`, ...), evaluate the stored
models live, and read the other seeds' results from the log. ``tests/test_checkpoints.py`` re-runs the
start of each run and compares it with the log. This module is the package's public face: the lessons read
these names as ``checkpoints.name``.
"""

from . import course, course_control, course_distil, course_scarce, masking, sharing, tlm
from .common import FOLDER, read_log
from .course import COURSE, course_data, load_course_model
from .course_control import load_course_control
from .course_distil import COURSE_DISTIL, load_course_student
from .distil import DISTIL, train_distil_run, train_distil_teacher
from .masking import MASKING, load_masking, masking_data
from .scores import blank_predictions, blank_scores, scores_of
from .sharing import SHARING, load_sharing
from .showcases import SHOWCASE, showcase
from .tlm import TLM, content_accuracy, load_tlm, tlm_blanks, tlm_data

#: What ``make pretrain`` trains, in this order: experiment name -> its record (``common.Experiment``).
EXPERIMENTS = {
    module.EXPERIMENT.name: module.EXPERIMENT
    for module in (masking, tlm, sharing, course, course_distil, course_scarce, course_control)
}

__all__ = [
    "COURSE",
    "COURSE_DISTIL",
    "DISTIL",
    "EXPERIMENTS",
    "FOLDER",
    "MASKING",
    "SHARING",
    "SHOWCASE",
    "TLM",
    "blank_predictions",
    "blank_scores",
    "content_accuracy",
    "course_data",
    "load_course_control",
    "load_course_model",
    "load_course_student",
    "load_masking",
    "load_sharing",
    "load_tlm",
    "masking_data",
    "read_log",
    "scores_of",
    "showcase",
    "tlm_blanks",
    "tlm_data",
    "train_distil_run",
    "train_distil_teacher",
]
