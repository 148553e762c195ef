"""Train the course's small checkpoints (make pretrain): lesson 1's masking runs, lesson 4's shared and
unshared layers, lesson 6's MLM and TLM models, lesson 2's teacher and distilled students.

    python tools/pretrain.py [masking] [tlm] [sharing] [distil]   (all by default; about an hour on 2 cores)

The settings are ``bertfamily.checkpoints.MASKING``, ``SHARING``, ``TLM`` and ``DISTIL``; the weights and a
log (settings, machine, per run the evaluation curve and the final metrics of the stored float16 weights) go to
``lib/bertfamily/checkpoints/``. The kernels are pinned, so on an AVX2 machine a re-run writes the
same numbers; ``tests/test_checkpoints.py`` re-runs the first evaluation step of each experiment
and compares it with the log.
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
            ck.halve(model)
            runs[name].append({"seed": seed, "parameters": count_parameters(model),
                               "curve_steps": history.eval_steps, "curve_loss": history.eval_loss,
                               "held": evaluate_mlm(model, data.held_out), "new": evaluate_mlm(model, data.new_mask),
                               "seconds": round(time.perf_counter() - start, 1)})
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
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiments", nargs="*", choices=["masking", "tlm", "sharing", "distil"],
                        default=["masking", "tlm", "sharing", "distil"])
    args = parser.parse_args(argv)
    from bertfamily import kernels
    kernels.pin()
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    torch.set_num_threads(int(kernels.PINNED["OMP_NUM_THREADS"]))
    from tqdm.auto import tqdm

    from bertfamily import checkpoints as ck
    for name in args.experiments:
        start = time.perf_counter()
        result = {"masking": masking, "tlm": tlm, "sharing": sharing, "distil": distil}[name](tqdm.write)
        result.update(machine=machine(), seconds=round(time.perf_counter() - start, 1))
        path = ck.FOLDER / f"{name}.json"
        path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
