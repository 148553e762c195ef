"""Train the course's checkpoints (make pretrain): lesson 1's masking runs, lesson 4's shared and
unshared layers, lesson 6's MLM and TLM models, the course model that lessons 1, 2 and 3 evaluate,
and its three 2-layer students (distilled, hard labels, random init) that lessons 2 and 3 compare, and the
students trained on 3% of the articles (course-scarce) that lesson 2 compares, and lesson 2's
compute-matched control (course-control: the students' shape from random weights, trained longer).

    python -m tools.pretrain [masking] [tlm] [sharing] [course] [course-distil] [course-scarce] [course-control]

All of them by default (``--dry-run``: each cut to two steps, into a scratch folder, its log checked
against the stored one's shape: what to run before hours of training); each log records how long its
experiment took (``seconds``) and on what machine, and the README's table of run times is read from
those logs.

Each experiment is a module of ``bertfamily.checkpoints`` (its settings, data and run), listed in
``bertfamily.checkpoints.EXPERIMENTS``; this driver runs them one after the other and does what they share:
the machine's description, the time taken and the log (settings, machine, per run the evaluation curve and the
final metrics of the stored float16 weights), written with the weights into ``lib/bertfamily/checkpoints/``.
The small runs pin the kernels, so on an AVX2 machine a re-run writes the same numbers; the course model and
its students train with bfloat16 products on the machine's own kernels (``Experiment.native``).
``tests/test_checkpoints.py`` re-runs the start of each experiment and compares it with the log.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
README_MARKS = (
    "<!-- pretrain-times: written by `python -m tools.pretrain --readme` from the logs -->",
    "<!-- /pretrain-times -->",
)
#: --dry-run: what each experiment's settings become, two steps (the course's in float32; one seed of lessons
#: 1 and 4, three of course-scarce's runs), so that every line of every run is gone through in minutes, not hours.
SHORT = {"steps": 2, "eval_every": 1}
DRY = {
    "masking": {**SHORT, "seeds": (0,)},
    "tlm": {"steps": 2},
    "sharing": {**SHORT, "seeds": (0,)},
    "course": {**SHORT, "autocast": None},
    "course-distil": {**SHORT, "autocast": None},
    "course-control": {**SHORT, "autocast": None},
    "course-scarce": {**SHORT, "autocast": None, "jobs": (("hard labels", 0), ("distilled", 0), ("first guesses", 0))},
}


def machine() -> dict:
    import torch

    from benchmarks.machine import cpu_model

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "capability": torch.backends.cpu.get_cpu_capability(),
    }


def recorder(name: str):
    """``record(log)`` for the experiment ``name``: adds the machine and the seconds since this call, and
    writes the log (``<name>.json``)."""
    from bertfamily.checkpoints.common import write_log

    start = time.perf_counter()

    def record(log: dict) -> Path:
        log.update(machine=machine(), seconds=round(time.perf_counter() - start, 1))
        return write_log(name, log)

    return record


def shape(value):
    """A log's shape: its keys at every depth, in order (a list by its first item)."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [shape(value[0])] if value and isinstance(value[0], (dict, list)) else "list"
    return None


def dry_run(names, progress) -> list[str]:
    """Run the experiments ``names`` cut short (:data:`DRY`), in order, into a scratch folder that starts with
    the stored weights (a student's teacher is the course model trained there, or the stored one): the names
    of those whose log is not shaped as the stored log (its keys at every depth, in order), or whose settings
    do not read back."""
    from bertfamily.checkpoints import EXPERIMENTS, common

    stored, wrong = {name: EXPERIMENTS[name].read() for name in names}, []
    with tempfile.TemporaryDirectory() as folder:
        for weights in common.FOLDER.glob("*.pt"):
            shutil.copy2(weights, folder)
        with mock.patch.object(common, "FOLDER", Path(folder)):
            for name in names:
                experiment = EXPERIMENTS[name]
                settings, record = experiment.settings.replace(**DRY[name]), recorder(name)
                record(experiment.run(progress, record, settings=settings))
                log = common.read_log(name)
                if name == "course":  # logged since the stored run: the guesses at the showcase blanks
                    log.pop("showcase")
                if shape(log) != shape(stored[name]) or type(settings).from_log(log["settings"]) != settings:
                    wrong.append(name)
                progress(f"dry run of {name}: {'not ' if name in wrong else ''}shaped as the stored log")
    return wrong


def runtimes_table() -> str:
    """The README's table of run times, read from the logs in ``lib/bertfamily/checkpoints/``."""
    from bertfamily.checkpoints import EXPERIMENTS

    lines = ["| experiment | lessons | minutes | threads | kernels | CPU | date |", "|---|---|--:|--:|---|---|---|"]
    for name, experiment in EXPERIMENTS.items():
        log = experiment.read()
        m = log["machine"]
        lines.append(
            f"| `{name}` | {experiment.lessons} | {log['seconds'] / 60:.0f} | {m['threads']} | "
            f"{m['capability']} | {m['cpu']} | {m['date'][:10]} |"
        )
    return "\n".join(lines)


def readme_with_runtimes(text: str) -> str:
    """``text`` (the README) with its run-time table replaced by :func:`runtimes_table`."""
    start, end = README_MARKS
    if start not in text or end not in text:
        raise ValueError(f"the README has no run-time table between {start!r} and {end!r}")
    head, rest = text.split(start, 1)
    return head + start + "\n" + runtimes_table() + "\n" + end + rest.split(end, 1)[1]


def main(argv=None) -> int:
    from bertfamily.checkpoints import EXPERIMENTS

    parser = argparse.ArgumentParser(
        prog="python -m tools.pretrain", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "experiments", nargs="*", help=f"which to train, of {', '.join(EXPERIMENTS)} (default: all of them)"
    )
    parser.add_argument(
        "--readme", action="store_true", help="only rewrite the README's table of run times from the logs"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: the pinned 2; the log records what was used)"
    )
    parser.add_argument(
        "--showcase-steps",
        type=int,
        nargs="+",
        default=None,
        metavar="STEP",
        help="only re-run the course model's first max(STEP) steps, logging lesson 1's showcase "
        "guesses at each STEP into course-showcase.json (its own kernels)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="run the experiments cut to two steps into a scratch folder, and check that each "
        "log is shaped as the stored one (minutes; nothing stored is touched)",
    )
    parser.add_argument(
        "--native",
        action="store_true",
        help="keep the machine's own kernels (AMX, AVX-512) instead of pinning AVX2; "
        "the course model and its students always train so",
    )
    args = parser.parse_args(argv)
    if args.showcase_steps and args.dry_run:
        parser.error("--showcase-steps and --dry-run: one at a time")
    if args.showcase_steps and args.experiments:
        parser.error("--showcase-steps re-runs the course model's start only: name no experiment with it")
    args.experiments = args.experiments or ([] if args.showcase_steps else list(EXPERIMENTS))
    unknown = [name for name in args.experiments if name not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment {unknown[0]!r}: choose from {', '.join(EXPERIMENTS)}")
    if args.readme:
        readme = ROOT / "README.md"
        readme.write_text(readme_with_runtimes(readme.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    from bertfamily import kernels

    native = [name for name in args.experiments if EXPERIMENTS[name].native]
    pinned = [name for name in args.experiments if not EXPERIMENTS[name].native]
    # the pinned runs here, the native ones in a process of their own (afterwards); a dry run all here
    if native and pinned and not args.dry_run:
        threads = ["--threads", str(args.threads)] if args.threads else []  # both halves run with --threads
        code = main([*pinned, *threads])
        return code or subprocess.call(
            [sys.executable, "-m", "tools.pretrain", "--native", *native, *threads], cwd=ROOT
        )
    if args.showcase_steps and (min(args.showcase_steps) < 0 or max(args.showcase_steps) < 1):
        parser.error(f"--showcase-steps must be steps >= 0, the largest >= 1, got {args.showcase_steps}")
    if args.native or native or args.showcase_steps or args.dry_run:
        os.environ.update(kernels.THREADS)
    else:
        kernels.pin()
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch

    torch.set_num_threads(args.threads or int(kernels.PINNED["OMP_NUM_THREADS"]))
    from tqdm.auto import tqdm

    if args.showcase_steps:
        from bertfamily.checkpoints.course import rerun_showcase

        result = rerun_showcase(tqdm.write, sorted(set(args.showcase_steps)), machine)
        print(f"wrote course-showcase.json ({result['seconds'][-1]:.0f} s)")
        return 0
    if args.dry_run:
        wrong = dry_run(args.experiments, tqdm.write)
        print(f"dry run: {', '.join(wrong) if wrong else 'every log'} {'not ' if wrong else ''}shaped as stored")
        return 1 if wrong else 0
    for name in args.experiments:
        record = recorder(name)
        log = EXPERIMENTS[name].run(tqdm.write, record)
        print(f"wrote {record(log).relative_to(ROOT)} ({log['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
