"""Lesson 3's timing of BERT-base, DistilBERT and DistilBERT int8 in a fresh process whose kernels are not pinned.

The course pins its kernels (:data:`bertfamily.kernels.ISA`) so that its outputs reproduce, but that cap
holds MKL's fp32 products and not torch's int8 kernels. :func:`time_pairs` therefore times the models in
a fresh Python process with the cap removed, where each library picks what this CPU offers.

The three models are never held at once: BERT-base (418 MiB of fp32 weights), DistilBERT (253 MiB) and
its int8 copy, with torch and transformers, would take 1.4 GiB beside the kernel that asked, over
Binder's 2 GiB with the notebook. The process times one *pair* at a time, interleaved run by run
(:func:`bertfamily.timing.compare_latency`): BERT-base against DistilBERT fp32, then, BERT-base
dropped, DistilBERT fp32 against DistilBERT int8. Each ratio comes from one pair, measured under the same
conditions; the speed of int8 relative to BERT-base is the product of the two (:func:`chain_ratios`).
One process rather than one a pair: torch, transformers and DistilBERT are loaded once (the lesson's
timing cell took 13.0 s so, 19.9 s with a process a pair: nbval, an idle 2-core machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping

#: The pairs timed, each in a process of its own: the first model of a pair is its baseline.
PAIRS = (("BERT-base fp32", "DistilBERT fp32"), ("DistilBERT fp32", "DistilBERT int8"))


def chain_ratios(ratios: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """Speeds relative to the first pair's baseline, from ``(slower, faster) -> seconds ratio`` of pairs
    that share a model: ``{A: 1, B: a/b, C: (a/b) * (b'/c)}`` for pairs (A, B) and (B, C).

    >>> chain_ratios({("A", "B"): 2.0, ("B", "C"): 3.0})
    {'A': 1.0, 'B': 2.0, 'C': 6.0}
    """
    pairs = list(ratios)
    if not pairs:
        raise ValueError("ratios must name at least one pair (baseline, other)")
    speed = {pairs[0][0]: 1.0}
    for first, second in pairs:
        if first not in speed:
            raise ValueError(
                f"the pair {(first, second)} does not start from a model timed before; timed so far: {list(speed)}"
            )
        speed[second] = speed[first] * ratios[(first, second)]
    return speed


def time_pairs(inputs: Mapping, threads: int = 1, warmup: int = 1, runs: int = 5, timeout: float = 300) -> dict:
    """Time :data:`PAIRS` on ``inputs``, each pair interleaved, in one fresh process with unpinned kernels.

    Returns ``pairs`` (one :func:`~bertfamily.timing.compare_latency` dict per pair, in order: its
    ``seconds``, ``times`` and ``speedup``), ``ratios`` (``(slower, faster)`` -> the first's median
    seconds over the second's), ``speedup`` (each model's speed relative to BERT-base, :func:`chain_ratios`) and
    the kernels used: ``capability`` (ATen's), ``quantized_engine`` (torch's int8 backend, ``"x86"``:
    FBGEMM), ``fp32_gemm`` (the matrix products MKL reported for an fp32 ``nn.Linear``, e.g. ``"SGEMM"``)
    and ``int8_onednn_calls`` (how many oneDNN primitives the int8 ``nn.Linear`` ran; 0: FBGEMM did it).
    """
    from bertfamily import kernels

    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    env = {k: v for k, v in os.environ.items() if k not in kernels.ISA}
    env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "ONEDNN_VERBOSE": "0"})
    payload = json.dumps(
        {
            "inputs": {k: v.tolist() for k, v in inputs.items()},
            "threads": threads,
            "warmup": warmup,
            "runs": runs,
            "pairs": [list(pair) for pair in PAIRS],
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", "from bertfamily.unpinned import _child; _child()"],
        input=payload,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode:
        raise RuntimeError(f"the timing process failed:\n{out.stderr[-2000:]}")
    lines = out.stdout.splitlines()
    result = json.loads(lines[-1])
    result["fp32_gemm"] = sorted(
        {line.split()[1].split("(")[0] for line in lines if line.startswith("MKL_VERBOSE ") and "(" in line.split()[1]}
    )
    result["int8_onednn_calls"] = sum(line.startswith("onednn_verbose,") and ",exec," in line for line in lines)
    result["ratios"] = {
        pair: timed["seconds"][pair[0]] / timed["seconds"][pair[1]]
        for pair, timed in zip(PAIRS, result["pairs"], strict=True)
    }
    result["speedup"] = chain_ratios(result["ratios"])
    return result


_HUB = {"BERT-base fp32": "bert-base-uncased", "DistilBERT fp32": "distilbert-base-uncased"}


def _child() -> None:
    """The process :func:`time_pairs` starts: reads its arguments (JSON) from stdin, times each pair in
    turn (a model is dropped once no later pair needs it), prints the result last."""
    import torch
    from torch import nn

    from bertfamily import models
    from bertfamily.quantization import quantize_linear
    from bertfamily.timing import compare_latency

    args = json.loads(sys.stdin.read())
    torch.set_num_threads(args["threads"])
    inputs = {k: torch.tensor(v) for k, v in args["inputs"].items()}
    probe = nn.Linear(8, 8)
    with torch.inference_mode(), torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
        probe(torch.ones(2, 8))  # MKL names the fp32 kernel on stdout
    sys.stdout.flush()
    built: dict = {}
    timed = []
    for n, pair in enumerate(args["pairs"]):
        for name in pair:
            if name in built:
                continue
            if name == "DistilBERT int8":
                built[name] = quantize_linear(
                    built.get("DistilBERT fp32") or models.load_pretrained(_HUB["DistilBERT fp32"], verbose=False)
                )
                with torch.inference_mode(), torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                    quantize_linear(nn.Sequential(probe))(torch.ones(2, 8))  # oneDNN, if it ran, says so
                sys.stdout.flush()
            else:
                built[name] = models.load_pretrained(_HUB[name], verbose=False)
        timed.append(
            compare_latency({name: built[name] for name in pair}, inputs, warmup=args["warmup"], runs=args["runs"])
        )
        later = {name for rest in args["pairs"][n + 1 :] for name in rest}
        built = {name: model for name, model in built.items() if name in later}  # BERT-base goes before int8 comes
    print(
        "\n"
        + json.dumps(
            {
                "pairs": timed,
                "capability": torch.backends.cpu.get_cpu_capability(),
                "quantized_engine": torch.backends.quantized.engine,
                "threads": torch.get_num_threads(),
            }
        ),
        flush=True,
    )
