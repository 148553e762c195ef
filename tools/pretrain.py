"""Train the course's checkpoints (make pretrain): lesson 1's masking runs, lesson 4's shared and
unshared layers, lesson 6's MLM and TLM models, the course model that lessons 1, 2 and 3 evaluate,
and its three 2-layer students (distilled, hard labels, random init) that lessons 2 and 3 compare, and the
students trained on 3% of the articles (course-scarce) that lesson 2 compares, and lesson 2's
compute-matched control (course-control: the students' shape from random weights, trained longer).

    python tools/pretrain.py [masking] [tlm] [sharing] [course] [course-distil] [course-scarce] [course-control]

All of them by default; each log records how long its experiment took (``seconds``) and on what
machine, and the README's table of run times is read from those logs.

The settings are ``bertfamily.checkpoints.MASKING``, ``SHARING``, ``TLM``, ``COURSE`` and
``COURSE_DISTIL``; the weights and a log (settings, machine, per run the evaluation curve and the
final metrics of the stored float16 weights) go to ``lib/bertfamily/checkpoints/``. The small runs
pin the kernels, so on an AVX2 machine a re-run writes the same numbers; the course model and its
students train with bfloat16 products on the machine's own kernels (see ``NATIVE``).
``tests/test_checkpoints.py`` re-runs the start of each experiment and compares it with the log.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks.run (the machine's description, shared with make bench)


def machine() -> dict:
    import torch

    from benchmarks.run import cpu_model
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "cpu": cpu_model(),
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "capability": torch.backends.cpu.get_cpu_capability()}


def masking(progress) -> dict:
    import torch

    from bertfamily import checkpoints as ck
    from bertfamily.pretraining import evaluate_mlm

    s = ck.MASKING
    data = ck.masking_data()
    runs = {name: [] for name in s["schemes"]}
    for seed in s["seeds"]:
        for name in s["schemes"]:
            start = time.perf_counter()
            model, history, scheme = ck.train_masking_run(data, name, seed, s["steps"])
            ck.halve(model)  # the metrics of the weights as stored
            seen = scheme(torch.arange(len(scheme)), history.epochs - 1)  # the masks of its last epoch
            runs[name].append({"seed": seed, "epochs": history.epochs, "curve_steps": history.eval_steps,
                               "curve_loss": history.eval_loss, "first_losses": history.train_loss[:5],
                               "own": evaluate_mlm(model, seen),
                               "new": evaluate_mlm(model, data.new_mask), "held": evaluate_mlm(model, data.held_out),
                               "seconds": round(time.perf_counter() - start, 1)})
            if seed in s["stored_seeds"]:
                ck.save(model, ck.file_name("masking", name, seed))
            progress(f"masking {name} seed {seed}: held-out {runs[name][-1]['held']['loss']:.3f} nats "
                     f"({runs[name][-1]['seconds']:.0f} s)")
    return {"settings": s, "unigram": data.unigram, "majority": data.majority, "runs": runs}


def tlm(progress) -> dict:
    from bertfamily import checkpoints as ck
    from bertfamily import tlm as T

    s = ck.TLM
    data = ck.tlm_data()
    vocab = data.tokenizer.get_vocab_size()
    runs = {}
    blanks, content = ck.tlm_blanks(data)
    jobs = [(objective, seed) for seed in s["seeds"] for objective in s["objectives"]]
    # independent one-thread jobs, two at a time: the same models as a serial loop would train
    shape = {"hidden": s["hidden"], "layers": s["layers"], "heads": s["heads"]}
    models, losses = T.train_models(vocab, *data.train, jobs, steps=s["steps"], batch_size=s["batch"], processes=2,
                                    model_kw=shape, progress=False, probability=s["probability"])
    for objective, seed in jobs:
        model = models[objective, seed]
        ck.halve(model)
        accuracy = ck.content_accuracy(model, blanks, content)
        runs[f"{objective}-{seed}"] = {"objective": objective, "seed": seed,
                                       "loss_curve": losses[objective, seed][::100], "content_accuracy": accuracy}
        if seed in s["stored_seeds"]:
            ck.save(model, ck.file_name("tlm", objective, seed))
        progress(f"tlm {objective} seed {seed}: " + ", ".join(f"{c} {100 * a:.1f}%" for c, a in accuracy.items()))
    return {"settings": s, "blanks": int(content.sum()), "runs": runs}


def sharing(progress) -> dict:
    import torch

    from bertfamily import checkpoints as ck
    from bertfamily.models import count_parameters
    from bertfamily.pretraining import evaluate_mlm

    s = ck.SHARING
    data = ck.masking_data()
    runs = {name: [] for name in s["variants"]}
    for seed in s["seeds"]:
        for name in s["variants"]:
            start = time.perf_counter()
            model, history = ck.train_sharing_run(data, name, seed, s["steps"])
            seconds = time.perf_counter() - start  # training and its evaluations, before the final ones
            ck.halve(model)
            runs[name].append({"seed": seed, "parameters": count_parameters(model),
                               "curve_steps": history.eval_steps, "curve_loss": history.eval_loss,
                               "first_losses": history.train_loss[:5],
                               "held": evaluate_mlm(model, data.held_out), "new": evaluate_mlm(model, data.new_mask),
                               "seconds": round(seconds, 1), "threads": torch.get_num_threads()})
            if seed in s["stored_seeds"]:
                ck.save(model, ck.file_name("sharing", name, seed))
            progress(f"sharing {name} seed {seed}: held-out {runs[name][-1]['held']['loss']:.3f} nats "
                     f"({runs[name][-1]['seconds']:.0f} s)")
    return {"settings": s, "unigram": data.unigram, "majority": data.majority, "runs": runs}


def course(progress) -> dict:
    """The course model; its weights and log are rewritten at every evaluation (a run cut short leaves
    its last model, and the log says how far it got). The curve is on the validation blanks; the test
    blanks are scored once, at the end."""
    from bertfamily import checkpoints as ck

    s = ck.COURSE
    data = ck.course_data()
    start = time.perf_counter()
    result = {"settings": s, "blanks": data.held_out.targets, "validation_blanks": data.validation.targets,
              "train_blocks": int(data.train.shape[0]), "test_blocks": int(data.test.shape[0]),
              "validation_blocks": int(data.validation.input_ids.shape[0]), "vocab_size": data.small["vocab_size"]}
    path = ck.FOLDER / "course.json"
    blanks = ck.showcase(data)  # lesson 1's showcase blanks, answered at the start and at every evaluation
    result["showcase"] = {"settings": ck.SHOWCASE, "blanks": blanks,
                          "steps": [0], "guesses": [ck.showcase_guesses(ck.course_model(data), data, blanks)]}

    def write(model, log):
        ck.save(model, "course-model")
        last = log["evaluations"][-1]
        result["showcase"]["steps"].append(last["step"])
        result["showcase"]["guesses"].append(ck.showcase_guesses(model, data, blanks))
        result.update(steps_done=last["step"], evaluations=log["evaluations"], machine=machine(),
                      seconds=round(time.perf_counter() - start, 1))
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        progress(f"course model step {last['step']}: validation top-1 {100 * last['hidden']['top1']:.1f}%, "
                 f"top-5 {100 * last['hidden']['top5']:.1f}% ({time.perf_counter() - start:.0f} s)")

    model, log = ck.train_course_model(data, on_evaluation=write)
    ck.halve(model)  # the metrics of the weights as stored
    ck.save(model, "course-model")
    result.update(final=ck.blank_scores(model, data.held_out), final_validation=ck.blank_scores(model, data.validation),
                  epochs=log["epochs"], first_losses=log["train_loss"][:10],
                  train_loss=[round(x, 4) for x in log["train_loss"]])
    return result


def course_showcase(progress, steps: list[int]) -> dict:
    """The start of the course model's run again (its settings and seed), stopped at ``max(steps)``: its
    top guesses at lesson 1's showcase blanks after each of ``steps`` (0: before training), for a model
    log that has none (``course.json`` from before the showcase was logged). Written to
    ``course-showcase.json`` after each of ``steps``, so a run cut short keeps what it has."""
    from bertfamily import checkpoints as ck

    data = ck.course_data()
    blanks, start = ck.showcase(data), time.perf_counter()
    path = ck.FOLDER / "course-showcase.json"
    result = {"settings": ck.COURSE, "showcase": ck.SHOWCASE, "blanks": blanks, "steps": [], "guesses": [],
              "seconds": []}

    def record(model, step):
        if step not in steps:
            return
        result["steps"].append(step)
        result["guesses"].append(ck.showcase_guesses(model, data, blanks))
        result["seconds"].append(round(time.perf_counter() - start, 1))
        result.update(machine=machine())
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        progress(f"showcase at step {step} ({time.perf_counter() - start:.0f} s)")

    record(ck.course_model(data), 0)
    ck.train_course_model(data, steps=max(steps), evaluate=False, on_step=record, progress=False)
    return result


def course_distil(progress) -> dict:
    """Lesson 2 at the course's scale: the stored course model and three 2-layer students (distilled, hard
    labels from the same start, random init), ``COURSE_DISTIL``. The log is rewritten after every evaluation,
    so a run cut short says how far it got."""
    from bertfamily import checkpoints as ck
    from bertfamily.models import count_parameters

    s = ck.COURSE_DISTIL
    data = ck.course_data()
    teacher = ck.load_course_model(data)
    path = ck.FOLDER / "course-distil.json"
    result = {"settings": s, "blanks": data.held_out.targets,
              "teacher": {"parameters": count_parameters(teacher), **ck.blank_scores(teacher, data.held_out)},
              "runs": {}}
    start = time.perf_counter()
    for arm in s["arms"]:
        begun, name = time.perf_counter(), "course-student-" + arm.replace(" ", "-")

        def write(model, log, arm=arm, begun=begun, name=name):
            ck.save(model, name)
            last = log["evaluations"][-1]
            result["runs"][arm] = {"parameters": count_parameters(model), "evaluations": log["evaluations"],
                                   "steps_done": last["step"], "seconds": round(time.perf_counter() - begun, 1)}
            result.update(machine=machine(), seconds=round(time.perf_counter() - start, 1))
            path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
            progress(f"{arm} step {last['step']}: validation top-1 {100 * last['hidden']['top1']:.1f}%, "
                     f"top-5 {100 * last['hidden']['top5']:.1f}% ({time.perf_counter() - start:.0f} s)")

        student, log = ck.distil_course_model(data, teacher, arm, on_evaluation=write)
        ck.halve(student)  # the metrics of the weights as stored
        ck.save(student, name)
        result["runs"][arm].update(final=ck.blank_scores(student, data.held_out),
                                   final_validation=ck.blank_scores(student, data.validation),
                                   first_losses=log["train_loss"][:5], epochs=log["epochs"],
                                   train_loss=[round(x, 4) for x in log["train_loss"]])
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def course_control(progress) -> dict:
    """Lesson 2's compute-matched control, ``COURSE_CONTROL``: the students' 2-layer shape from random weights,
    the course model's own recipe, for the teacher's steps plus a student's. Weights stored after every
    evaluation (a run cut short leaves its last model); the log holds the validation curve, the test scores and
    each hidden test blank's right or wrong first guess, for it and for the stored distilled student (the pair
    an article-level interval compares)."""
    from bertfamily import checkpoints as ck
    from bertfamily.models import count_parameters

    s = ck.COURSE_CONTROL
    data = ck.course_data()
    path, start = ck.FOLDER / "course-control.json", time.perf_counter()
    result = {"settings": s, "blanks": data.held_out.targets}

    def write(model, log):
        ck.save(model, "course-control")
        last = log["evaluations"][-1]
        result.update(parameters=count_parameters(model), evaluations=log["evaluations"], steps_done=last["step"],
                      machine=machine(), seconds=round(time.perf_counter() - start, 1))
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        progress(f"control step {last['step']}: validation top-1 {100 * last['hidden']['top1']:.1f}% "
                 f"({time.perf_counter() - start:.0f} s)")

    model, log = ck.train_course_model(data, settings=s, on_evaluation=write)
    ck.halve(model)  # the metrics of the weights as stored
    ck.save(model, "course-control")
    distilled = ck.load_course_student(data, "distilled")
    result.update(final=ck.blank_scores(model, data.held_out), final_validation=ck.blank_scores(model, data.validation),
                  right=ck.right_answers(model, data.held_out),
                  distilled_right=ck.right_answers(distilled, data.held_out), epochs=log["epochs"],
                  first_losses=log["train_loss"][:10], train_loss=[round(x, 4) for x in log["train_loss"]])
    return result


def course_scarce(progress) -> dict:
    """Lesson 2's second experiment, ``COURSE_SCARCE``: the course model's 2-layer students trained on 3% of the
    training articles, with hard labels, the teacher's soft targets or its first guesses, seed by seed. The log
    is rewritten after every evaluation (``done`` lists the finished runs); per run it holds the validation
    curve, the test scores of the last step and of the best validation step, and each hidden test blank's
    right (1) or wrong (0) first guess at both (for intervals by article). No weights are stored."""
    from bertfamily import checkpoints as ck

    s = ck.COURSE_SCARCE
    full = ck.course_data()
    data = ck.scarce_data(full, s)
    teacher = ck.load_course_model(full)
    path = ck.FOLDER / "course-scarce.json"
    result = {"settings": s, "articles": ck.scarce_articles(full, s).tolist(), "train_articles": full.articles,
              "train_blocks": int(data.train.shape[0]), "blanks": full.held_out.targets,
              "validation_blanks": full.validation.targets, "runs": {arm: [] for arm in s["arms"]}, "done": []}
    start = time.perf_counter()
    for arm, seed in s["jobs"]:
        begun, run = time.perf_counter(), {"seed": seed}
        result["runs"][arm].append(run)

        def write(model, log, run=run, begun=begun, arm=arm):
            last = log["evaluations"][-1]
            run.update(evaluations=log["evaluations"], steps_done=last["step"],
                       seconds=round(time.perf_counter() - begun, 1))
            result.update(machine=machine(), seconds=round(time.perf_counter() - start, 1))
            path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
            progress(f"{arm} seed {run['seed']} step {last['step']}: validation top-1 "
                     f"{100 * last['hidden']['top1']:.1f}% ({time.perf_counter() - start:.0f} s)")

        student, log, best = ck.train_scarce_run(data, teacher, arm, seed, settings=s, progress=False,
                                                 on_evaluation=write)
        run.update(test_last=ck.blank_scores(student, full.held_out),
                   right_last=ck.right_answers(student, full.held_out))
        student.load_state_dict(best["state"])
        run.update(best_step=best["step"], test_best=ck.blank_scores(student, full.held_out),
                   right_best=ck.right_answers(student, full.held_out), first_losses=log["train_loss"][:5],
                   epochs=log["epochs"], train_loss=[round(x, 4) for x in log["train_loss"]],
                   seconds=round(time.perf_counter() - begun, 1))
        result["done"].append([arm, seed])
        result.update(machine=machine(), seconds=round(time.perf_counter() - start, 1))
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        progress(f"{arm} seed {seed}: test top-1 {100 * run['test_best']['hidden']['top1']:.1f}% at its best step "
                 f"{best['step']}, {100 * run['test_last']['hidden']['top1']:.1f}% at the last")
    return result


#: The course model and its students train with bfloat16 matrix products, fast on CPUs with AMX or AVX-512
#: BF16 and slow where oneDNN is capped at AVX2: they run with the machine's own kernels (the threads stay
#: pinned); their evaluations are float32, and the tests compare a re-run with the log within a tolerance.
NATIVE = ("course", "course-distil", "course-scarce", "course-control")


EXPERIMENTS = ("masking", "tlm", "sharing", "course", "course-distil", "course-scarce", "course-control")
README_MARKS = ("<!-- pretrain-times: written by `python tools/pretrain.py --readme` from the logs -->",
                "<!-- /pretrain-times -->")


def runtimes_table() -> str:
    """The README's table of run times, read from the logs in ``lib/bertfamily/checkpoints/``."""
    from bertfamily import checkpoints as ck

    lines = ["| experiment | lessons | minutes | threads | kernels | CPU | date |", "|---|---|--:|--:|---|---|---|"]
    lessons = {"masking": "1", "tlm": "6", "sharing": "4", "course": "1, 2, 3", "course-distil": "2, 3",
               "course-scarce": "2", "course-control": "2"}
    for name in EXPERIMENTS:
        log = ck.read_log(name)
        m = log["machine"]
        lines.append(f"| `{name}` | {lessons[name]} | {log['seconds'] / 60:.0f} | {m['threads']} | "
                     f"{m['capability']} | {m['cpu']} | {m['date'][:10]} |")
    return "\n".join(lines)


def readme_with_runtimes(text: str) -> str:
    """``text`` (the README) with its run-time table replaced by :func:`runtimes_table`."""
    start, end = README_MARKS
    if start not in text or end not in text:
        raise ValueError(f"the README has no run-time table between {start!r} and {end!r}")
    head, rest = text.split(start, 1)
    return head + start + "\n" + runtimes_table() + "\n" + end + rest.split(end, 1)[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiments", nargs="*",
                        help=f"which to train, of {', '.join(EXPERIMENTS)} (default: all of them)")
    parser.add_argument("--readme", action="store_true",
                        help="only rewrite the README's table of run times from the logs")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: the pinned 2; the log records what was used)")
    parser.add_argument("--showcase-steps", type=int, nargs="+", default=None, metavar="STEP",
                        help="only re-run the course model's first max(STEP) steps, logging lesson 1's showcase "
                             "guesses at each STEP into course-showcase.json (its own kernels)")
    parser.add_argument("--native", action="store_true",
                        help="keep the machine's own kernels (AMX, AVX-512) instead of pinning AVX2; "
                             "the course model and its students always train so")
    args = parser.parse_args(argv)
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
    native = [name for name in args.experiments if name in NATIVE]
    pinned = [name for name in args.experiments if name not in NATIVE]
    if native and pinned:  # the pinned runs here, the native ones in a process of their own (afterwards)
        import subprocess
        code = main(pinned)
        return code or subprocess.call([sys.executable, __file__, "--native", *native]
                                       + (["--threads", str(args.threads)] if args.threads else []))
    if args.showcase_steps and (min(args.showcase_steps) < 0 or max(args.showcase_steps) < 1):
        parser.error(f"--showcase-steps must be steps >= 0, the largest >= 1, got {args.showcase_steps}")
    if args.native or native or args.showcase_steps:
        os.environ.update(kernels.THREADS)
    else:
        kernels.pin()
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    torch.set_num_threads(args.threads or int(kernels.PINNED["OMP_NUM_THREADS"]))
    from tqdm.auto import tqdm

    from bertfamily import checkpoints as ck
    if args.showcase_steps:
        result = course_showcase(tqdm.write, sorted(set(args.showcase_steps)))
        print(f"wrote {ck.FOLDER / 'course-showcase.json'} ({result['seconds'][-1]:.0f} s)")
        return 0
    for name in args.experiments:
        start = time.perf_counter()
        result = {"masking": masking, "tlm": tlm, "sharing": sharing, "course": course,
                  "course-distil": course_distil, "course-scarce": course_scarce,
                  "course-control": course_control}[name](tqdm.write)
        result.update(machine=machine(), seconds=round(time.perf_counter() - start, 1))
        path = ck.FOLDER / f"{name}.json"
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
