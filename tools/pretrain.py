"""Train the course's checkpoints (make pretrain): lesson 1's masking runs, lesson 4's shared and
unshared layers, lesson 6's MLM and TLM models, lesson 2's teacher and distilled students (with the
compute-matched control), the course model that lessons 1 and 3 evaluate, and its distilled student
with that one's matched control (lessons 2 and 3).

    python tools/pretrain.py [masking] [tlm] [sharing] [distil] [distil-matched] [course] [course-distil]

All but ``distil-matched`` by default (that one adds only lesson 2's control to a stored log): about
four and a half hours on 2 cores, 1 h 55 min of it the course model and 1 h 40 min its distillation
(``course-distil``: the student, and the matched control's own pretraining).

The settings are ``bertfamily.checkpoints.MASKING``, ``SHARING``, ``TLM``, ``DISTIL`` and ``COURSE``; the
weights and a log (settings, machine, per run the evaluation curve and the final metrics of the stored
float16 weights) go to ``lib/bertfamily/checkpoints/``. The kernels are pinned, so on an AVX2 machine a
re-run writes the same numbers; ``tests/test_checkpoints.py`` re-runs the start of each experiment and
compares it with the log.
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
                               "curve_loss": history.eval_loss, "own": evaluate_mlm(model, seen),
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
                               "held": evaluate_mlm(model, data.held_out), "new": evaluate_mlm(model, data.new_mask),
                               "seconds": round(seconds, 1), "threads": torch.get_num_threads()})
            if seed in s["stored_seeds"]:
                ck.save(model, ck.file_name("sharing", name, seed))
            progress(f"sharing {name} seed {seed}: held-out {runs[name][-1]['held']['loss']:.3f} nats "
                     f"({runs[name][-1]['seconds']:.0f} s)")
    return {"settings": s, "unigram": data.unigram, "majority": data.majority, "runs": runs}


def distil(progress) -> dict:
    from bertfamily import checkpoints as ck
    from bertfamily.pretraining import evaluate_mlm

    s = ck.DISTIL
    data = ck.masking_data()
    start = time.perf_counter()
    teacher, history = ck.train_distil_teacher(data)
    ck.halve(teacher)  # the students learn from the teacher as stored
    ck.save(teacher, "distil-teacher")
    result = {"settings": s, "unigram": data.unigram, "majority": data.majority,
              "teacher": {"curve_steps": history.eval_steps, "curve_loss": history.eval_loss,
                          "held": evaluate_mlm(teacher, data.held_out),
                          "seconds": round(time.perf_counter() - start, 1)},
              "runs": {arm: [] for arm in s["arms"]}}
    progress(f"distil teacher: held-out {result['teacher']['held']['loss']:.3f} nats")
    for seed in s["seeds"]:
        for arm in s["arms"]:
            start = time.perf_counter()
            student, history = ck.train_distil_run(data, teacher, arm, seed, s["steps"])
            ck.halve(student)
            result["runs"][arm].append({"seed": seed, "curve_steps": history.eval_steps,
                                        "curve_loss": history.eval_loss, "held": evaluate_mlm(student, data.held_out),
                                        "seconds": round(time.perf_counter() - start, 1)})
            if arm in s["stored"] and seed in s["stored_seeds"]:
                ck.save(student, ck.file_name("distil", arm, seed))
            progress(f"distil {arm} seed {seed}: held-out {result['runs'][arm][-1]['held']['loss']:.3f} nats "
                     f"({result['runs'][arm][-1]['seconds']:.0f} s)")
    return matched(progress, result, teacher)


def matched(progress, result=None, teacher=None) -> dict:
    """Lesson 2's compute-matched control: a random-init student trained with the triple loss for the
    teacher's steps plus its own. Alone (``distil-matched``) it adds the control to the stored log and teacher."""
    import torch

    from bertfamily import checkpoints as ck
    from bertfamily.pretraining import evaluate_mlm

    s = ck.DISTIL
    data = ck.masking_data()
    if result is None:
        result = ck.read_log("distil")
        teacher = ck.load_distil(data, "teacher")
    result["settings"], arm, runs = s, s["matched"], []
    for seed in s["seeds"]:
        start = time.perf_counter()
        student, history = ck.train_distil_run(data, teacher, arm, seed, ck.matched_steps(s))
        ck.halve(student)
        runs.append({"seed": seed, "curve_steps": history.eval_steps, "curve_loss": history.eval_loss,
                     "held": evaluate_mlm(student, data.held_out),
                     "seconds": round(time.perf_counter() - start, 1), "threads": torch.get_num_threads()})
        progress(f"distil {arm} seed {seed}: held-out {runs[-1]['held']['loss']:.3f} nats "
                 f"({runs[-1]['seconds']:.0f} s)")
    result["runs"][arm] = runs
    return result


def course(progress) -> dict:
    """The course model; its weights and log are rewritten at every evaluation (a run cut short leaves
    its last model, and the log says how far it got)."""
    from bertfamily import checkpoints as ck

    s = ck.COURSE
    data = ck.course_data()
    start = time.perf_counter()
    result = {"settings": s, "blanks": data.held_out.targets, "train_blocks": int(data.train.shape[0]),
              "test_blocks": int(data.test.shape[0]), "vocab_size": data.small["vocab_size"]}

    def write(model, log):
        ck.save(model, "course-model")
        last = log["evaluations"][-1]
        result.update(steps_done=last["step"], evaluations=log["evaluations"], machine=machine(),
                      seconds=round(time.perf_counter() - start, 1))
        (ck.FOLDER / "course.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        progress(f"course model step {last['step']}: hidden blanks top-1 {100 * last['hidden']['top1']:.1f}%, "
                 f"top-5 {100 * last['hidden']['top5']:.1f}% ({time.perf_counter() - start:.0f} s)")

    model, log = ck.train_course_model(data, on_evaluation=write)
    ck.halve(model)  # the metrics of the weights as stored
    ck.save(model, "course-model")
    result.update(final=ck.blank_scores(model, data.held_out), epochs=log["epochs"],
                  first_losses=log["train_loss"][:10], train_loss=[round(x, 4) for x in log["train_loss"]])
    return result


def course_distil(progress) -> dict:
    """Lesson 2 at the course's scale: the stored course model distilled into a 2-layer student, and the
    compute-matched control (the 2-layer model trained the course model's way, then distilled). The log is
    rewritten after every evaluation, so a run cut short says how far it got."""
    from bertfamily import checkpoints as ck
    from bertfamily.models import count_parameters

    s = ck.COURSE_DISTIL
    data = ck.course_data()
    teacher = ck.load_course_model(data)
    path = ck.FOLDER / "course-distil.json"
    result = {"settings": s, "control_settings": ck.course_control_settings(s), "blanks": data.held_out.targets,
              "teacher": {"parameters": count_parameters(teacher), **ck.blank_scores(teacher, data.held_out)},
              "runs": {}}
    start = time.perf_counter()

    def writer(key, name=None):
        def write(model, log):
            if name is not None:
                ck.save(model, name)
            last = log["evaluations"][-1]
            result["runs"][key] = {"parameters": count_parameters(model), "evaluations": log["evaluations"],
                                   "steps_done": last["step"], "seconds": round(time.perf_counter() - begun, 1)}
            result.update(machine=machine(), seconds=round(time.perf_counter() - start, 1))
            path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
            progress(f"{key} step {last['step']}: hidden blanks top-1 {100 * last['hidden']['top1']:.1f}%, "
                     f"top-5 {100 * last['hidden']['top5']:.1f}% ({time.perf_counter() - start:.0f} s)")
        return write

    def finish(key, name, model, log):
        ck.halve(model)  # the metrics of the weights as stored
        ck.save(model, name)
        result["runs"][key].update(final=ck.blank_scores(model, data.held_out), first_losses=log["train_loss"][:5],
                                   train_loss=[round(x, 4) for x in log["train_loss"]], epochs=log["epochs"])
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    begun = time.perf_counter()
    student, log = ck.distil_course_model(data, teacher, ck.course_student(data, teacher, s),
                                          on_evaluation=writer("distilled"))
    finish("distilled", "course-student-distilled", student, log)

    begun = time.perf_counter()
    control, log = ck.train_course_model(data, settings=ck.course_control_settings(s),
                                         on_evaluation=writer("control pretraining"))
    ck.halve(control)  # it starts its distillation from what would be stored, as the other student does
    result["runs"]["control pretraining"].update(final=ck.blank_scores(control, data.held_out),
                                                 first_losses=log["train_loss"][:5], epochs=log["epochs"])
    begun = time.perf_counter()
    control, log = ck.distil_course_model(data, teacher, control, on_evaluation=writer("matched control"))
    finish("matched control", "course-student-matched-control", control, log)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiments", nargs="*",
                        default=["masking", "tlm", "sharing", "distil", "course", "course-distil"],
                        choices=["masking", "tlm", "sharing", "distil", "distil-matched", "course",
                                 "course-distil"])
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: the pinned 2; the log records what was used)")
    args = parser.parse_args(argv)
    from bertfamily import kernels
    kernels.pin()
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    torch.set_num_threads(args.threads or int(kernels.PINNED["OMP_NUM_THREADS"]))
    from tqdm.auto import tqdm

    from bertfamily import checkpoints as ck
    for name in args.experiments:
        start = time.perf_counter()
        result = {"masking": masking, "tlm": tlm, "sharing": sharing, "distil": distil,
                  "distil-matched": matched, "course": course,
                  "course-distil": course_distil}[name](tqdm.write)
        elapsed = round(time.perf_counter() - start, 1)
        if name == "distil-matched":  # the control joins a log whose other runs took their own time
            elapsed = round(result["seconds"] + elapsed, 1)
        result.update(machine=machine(), seconds=elapsed)
        path = ck.FOLDER / f"{name.removesuffix('-matched')}.json"
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
