"""Which numerical kernels torch may use: the one place that pins them, so outputs reproduce bit for bit.

torch picks its vectorised code by CPU: AVX-512 where the CPU has it, AVX2 otherwise, and MKL and
oneDNN do the same. Different code rounds differently, and a training run amplifies the last bit
into a different model. The committed outputs of the notebooks were made with the environment
:data:`PINNED`; every path that executes notebooks (``make test``, ``make execute``, ``make bench``,
``make benchmark``, the grader's sandbox) starts its kernels with :func:`pinned_environ`.

* On an x86-64 CPU with AVX2 (every Intel and AMD CPU since 2013-2015) the pinned run takes the
  same code paths as the committed one: outputs are compared digit by digit ("exact" mode).
* Elsewhere (ARM, Apple silicon, x86 without AVX2), or where ``ATEN_CPU_CAPABILITY`` is set to
  something else by hand (``ATEN_CPU_CAPABILITY=default make test`` uses torch's generic kernels, a
  stand-in for "another CPU"), bits cannot match ("tolerant" mode): counts, sizes and every cell not
  marked as a measurement are still compared digit by digit; a cell whose metadata holds
  ``"measured": {"abs": A, "rel": R, "why": "..."}`` has each of its numbers compared within
  ``A + R * |committed value|`` and the rest of its text exactly (:func:`reconcile`).

This module imports nothing heavy (no torch): it must run before torch is imported.
"""

from __future__ import annotations

import copy
import functools
import os
import platform
import re
import sys

#: The code paths the committed outputs were made with. Each variable was checked to matter or to
#: be needed on AVX-512 machines (see CONTRIBUTING.md, "Reproducible anywhere"). Only set on AVX2 CPUs.
ISA = {
    "ATEN_CPU_CAPABILITY": "avx2",  # ATen's own vectorised kernels (elementwise, reductions, softmax)
    "MKL_CBWR": "AVX2",  # MKL's conditional numerical reproducibility: the AVX2 branch
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # MKL's dispatch capped at AVX2
    "DNNL_MAX_CPU_ISA": "AVX2",  # oneDNN (int8 linear layers of quantize_dynamic, some matmuls)
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # the same switch under oneDNN's newer name
}
#: Intra-op threads: a parallel reduction is split per thread. Set on every CPU.
THREADS = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
#: The environment the committed outputs were made with.
PINNED = {**ISA, **THREADS}
#: Where several processes share the cores (make test's workers and kernels, the grader's jobs):
#: idle OpenMP threads sleep instead of spinning. It changes no result, only the waiting; measured
#: with three 2-thread processes on 2 cores: 151 s spinning, 14 s sleeping.
SHARED_CORES = {"OMP_WAIT_POLICY": "PASSIVE"}
#: The one variable a person may set to move off the pinned kernels on purpose.
SWITCH = "ATEN_CPU_CAPABILITY"
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


@functools.cache
def cpu_has_avx2() -> bool:
    """True on an x86-64 CPU with AVX2 (read from /proc/cpuinfo, or sysctl on macOS)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        pass
    if sys.platform == "darwin":
        import subprocess

        out = subprocess.run(["sysctl", "-n", "machdep.cpu.leaf7_features"], capture_output=True, text=True)
        return "AVX2" in out.stdout.upper()
    return False  # unknown: do not force AVX2 code on a CPU that may not run it


def pinned_environ(environ=None, threads: int | None = None, shared_cores: bool = False) -> dict:
    """A copy of ``environ`` (default ``os.environ``) with the kernels pinned.

    ``ATEN_CPU_CAPABILITY`` set by hand is kept (the documented switch). On a CPU without AVX2 the
    capability is not pinned (AVX2 code would crash it) and the run is "tolerant". ``threads``
    overrides the thread count (the grader: cores / jobs; its exercise computes counts and sizes).
    ``shared_cores`` adds :data:`SHARED_CORES` (kept where already set).
    """
    env = dict(os.environ if environ is None else environ)
    user_choice = env.get(SWITCH)
    env.update(PINNED)
    if user_choice:
        env[SWITCH] = user_choice
    elif not cpu_has_avx2():
        for name in ISA:
            env.pop(name)
    if threads is not None:
        env.update(dict.fromkeys(THREADS, str(max(1, int(threads)))))
    if shared_cores:
        for key, value in SHARED_CORES.items():
            env.setdefault(key, value)
    return env


def mode(environ=None) -> str:
    """``"exact"`` where the pinned kernels are in effect, ``"tolerant"`` where bits cannot match."""
    env = os.environ if environ is None else environ
    pinned = all(env.get(k) == v for k, v in ISA.items())
    return "exact" if pinned and cpu_has_avx2() else "tolerant"


def pin() -> str:
    """Pin this process's kernels (call before ``import torch``); return :func:`mode`.

    Once torch is imported its choice is made: then nothing changes and a warning says so.
    """
    if "torch" in sys.modules:
        import warnings

        warnings.warn(
            "bertfamily.kernels.pin() called after torch was imported: the kernels are "
            "whatever torch chose; restart the kernel and pin first",
            stacklevel=2,
        )
        return mode()
    os.environ.update(pinned_environ())  # only adds and overrides: the kernel's own variables stay
    return mode()


def tolerance(spec) -> tuple[float, float]:
    """``(abs, rel)`` from a cell's ``measured`` metadata; a clear error for anything else."""
    if not isinstance(spec, dict) or not ({"abs", "rel"} & spec.keys()) or not isinstance(spec.get("why"), str):
        raise ValueError(
            f"'measured' metadata must be a dict with 'abs' and/or 'rel' (non-negative numbers) "
            f"and 'why' (where the tolerance comes from), got {spec!r}"
        )
    values = (spec.get("abs", 0.0), spec.get("rel", 0.0))
    if not all(isinstance(v, (int, float)) and v >= 0 for v in values):
        raise ValueError(f"'abs' and 'rel' must be non-negative numbers, got {spec!r}")
    if spec.get("text", "exact") not in ("exact", "any"):
        raise ValueError(f"'text' must be 'exact' (the default) or 'any', got {spec!r}")
    return float(values[0]), float(values[1])


def any_text(spec) -> bool:
    """Whether a ``measured`` cell's words are measurements too (``"text": "any"``: a model's ranked
    guesses, which other kernels may reorder near a tie): then, off the pinned kernels, only its
    outputs' kinds and line counts are compared."""
    return isinstance(spec, dict) and spec.get("text") == "any"


def reconcile(test: str, reference: str, abs_tol: float, rel_tol: float = 0.0, any_text: bool = False) -> str:
    """``reference`` if ``test`` says the same with every number within tolerance; else ``test``.

    The text between numbers must be identical, and so must the count of numbers: only the values
    of measurements may move. The caller then compares as usual, so a real difference still fails.
    With ``any_text`` (:func:`any_text`) the words may change too, not the number of lines.
    """
    if test == reference:
        return test
    if any_text:
        return reference if test.count("\n") == reference.count("\n") else test
    t_numbers, r_numbers = _NUMBER.findall(test), _NUMBER.findall(reference)
    if _NUMBER.split(test) != _NUMBER.split(reference) or len(t_numbers) != len(r_numbers):
        return test
    for t, r in zip(t_numbers, r_numbers, strict=True):
        if abs(float(t) - float(r)) > abs_tol + rel_tol * abs(float(r)) + 1e-12:
            return test
    return reference


def reconcile_outputs(
    test: list, reference: list, abs_tol: float, rel_tol: float = 0.0, any_text: bool = False
) -> list:
    """Apply :func:`reconcile` to each text of a cell's outputs, paired in order (a new list).

    Outputs of a different number or kind are returned unchanged, to fail the usual comparison.
    """
    if len(test) != len(reference) or any(
        t.get("output_type") != r.get("output_type") for t, r in zip(test, reference, strict=True)
    ):
        return test
    out = []
    for t, r in zip(test, reference, strict=True):
        t = copy.deepcopy(t)
        if isinstance(t.get("text"), str) and isinstance(r.get("text"), str):
            t["text"] = reconcile(t["text"], r["text"], abs_tol, rel_tol, any_text)
        for key, value in (t.get("data") or {}).items():
            ref_value = (r.get("data") or {}).get(key)
            if isinstance(value, str) and isinstance(ref_value, str):
                t["data"][key] = reconcile(value, ref_value, abs_tol, rel_tol, any_text)
        out.append(t)
    return out


def describe(environ=None) -> str:
    """One line for a report: the mode and why."""
    env = os.environ if environ is None else environ
    if mode(env) == "exact":
        return "exact: kernels pinned to AVX2 (outputs reproduce bit for bit)"
    why = (
        f"{SWITCH}={env[SWITCH]} set by hand"
        if env.get(SWITCH) not in (None, "avx2")
        else "no AVX2 on this CPU"
        if not cpu_has_avx2()
        else "kernels not pinned in this process"
    )
    return f"tolerant: {why}; measured cells compared within their stated tolerance"


if __name__ == "__main__":  # `python -m bertfamily.kernels`: the pinned variables, for a shell's `env`
    print(" ".join(f"{k}={v}" for k, v in pinned_environ({}).items()))
