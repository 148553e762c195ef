"""Timing on a CPU: torch's threads for a while, and the median of timed calls after warm-up.

* :func:`threads` is the one "set torch's CPU threads for a while" switch of the course.
* :func:`run_times` is the one timing loop: warm-up calls, then ``runs`` rounds in which every
  callable is timed once, in turn (interleaved), so that a noisy neighbour slows them all alike.
  Everything else here is a thin face of it:
* :func:`latency` / :func:`compare_latency`: forward passes of one model / several models on the
  same inputs (lesson 3, also :mod:`bertfamily.quantization`);
* :func:`forward_latency` / :func:`interleaved_latency`: the same on random token ids of a given
  length (lesson 4, also :mod:`bertfamily.sharing`); :func:`time_call` for operations too quick to
  time one call at a time; :func:`median`.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Mapping

import torch
from torch import nn

__all__ = [
    "positive_int",
    "threads",
    "run_times",
    "latency",
    "compare_latency",
    "forward_latency",
    "interleaved_latency",
    "time_call",
    "median",
]


def positive_int(value, name):
    """``value`` when it is a positive integer (not a bool); otherwise a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


@contextlib.contextmanager
def threads(n: int | None):
    """Run torch's CPU kernels on ``n`` threads for a while (``None``: leave the setting alone).

    One thread is the steadiest for timing on a shared machine, and the fastest for tiny models,
    whose small matrix products cost more in synchronisation than they gain from threads.
    """
    if n is None:
        yield
        return
    positive_int(n, "threads")
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def check_module(model, name: str = "model") -> None:
    if not isinstance(model, nn.Module):
        raise ValueError(f"{name} must be a torch.nn.Module, got {type(model).__name__}")


def _check_counts(warmup, runs) -> None:
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ValueError(f"runs must be an integer >= 1, got {runs!r}")


def _call(model, inputs):
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def run_times(calls: Mapping, warmup: int = 1, runs: int = 5, number: int = 1, rotate: bool = False) -> dict:
    """The course's one timing loop: ``calls`` maps a name to a function of no arguments.

    Every function is called ``warmup`` times untimed (in order), then ``runs`` rounds time each
    function once, one after the other; a timing is the mean of ``number`` consecutive calls. With
    ``rotate``, round ``r`` starts at the ``r``-th function (so none is always first after another).
    Returns name -> list of ``runs`` seconds. No gradient mode or thread setting is chosen here.
    """
    _check_counts(warmup, runs)
    positive_int(number, "number")
    names = list(calls)
    times = {name: [] for name in names}
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    for r in range(runs):
        k = r % len(names) if rotate else 0
        for name in names[k:] + names[:k]:
            start = time.perf_counter()
            for _ in range(number):
                calls[name]()
            times[name].append((time.perf_counter() - start) / number)
    return times


def _forward(model, inputs):
    return lambda: _call(model, inputs)


def latency(model: nn.Module, inputs, warmup: int = 2, runs: int = 5) -> float:
    """Median wall-clock seconds of one forward pass of ``model`` on ``inputs``, after warm-up calls.

    ``inputs`` is a mapping (passed as keyword arguments, as a tokenizer's output), a tuple or list
    (positional arguments) or a single tensor. Runs under ``torch.inference_mode`` in eval mode.
    """
    check_module(model)
    _check_counts(warmup, runs)
    model.eval()
    with torch.inference_mode():
        times = run_times({"model": _forward(model, inputs)}, warmup=warmup, runs=runs)["model"]
    return statistics.median(times)


def compare_latency(models: Mapping, inputs, warmup: int = 2, runs: int = 5, baseline: str | None = None) -> dict:
    """Time several models on the same inputs, in turn, and compare them to a baseline.

    Each run times every model once, one after the other (interleaved), so a slow moment of the
    machine affects them all. Returns a dict with

    * ``"seconds"``: name -> median seconds of one forward pass;
    * ``"times"``: name -> the list of every timed run, in seconds (for a spread);
    * ``"speedup"``: name -> ``seconds[baseline] / seconds[name]`` (above 1: faster than the baseline);
    * ``"baseline"``: the name of the baseline, by default the first model of ``models``.
    """
    if not isinstance(models, Mapping) or not models:
        raise ValueError("models must be a non-empty dict of name -> torch.nn.Module")
    for name, model in models.items():
        check_module(model, f"models[{name!r}]")
    _check_counts(warmup, runs)
    if baseline is None:
        baseline = next(iter(models))
    if baseline not in models:
        raise ValueError(f"baseline must be one of {list(models)}, got {baseline!r}")
    for model in models.values():
        model.eval()
    with torch.inference_mode():
        times = run_times({name: _forward(model, inputs) for name, model in models.items()}, warmup=warmup, runs=runs)
    seconds = {name: statistics.median(ts) for name, ts in times.items()}
    speedup = {name: seconds[baseline] / s for name, s in seconds.items()}
    return {"seconds": seconds, "times": times, "speedup": speedup, "baseline": baseline}


def _random_ids(vocab_size: int, seq_len: int, batch: int) -> torch.Tensor:
    s, b = positive_int(seq_len, "seq_len"), positive_int(batch, "batch")
    return torch.randint(0, vocab_size, (b, s), generator=torch.Generator().manual_seed(0))


def forward_latency(
    model, seq_len: int, batch: int = 1, runs: int = 5, warmup: int = 1, threads: int | None = None
) -> list:
    """Seconds taken by each of ``runs`` forward passes (after ``warmup`` untimed ones), no gradients.

    The input is ``batch x seq_len`` random token ids (fixed seed). Report the median: the first runs
    and a busy machine make the mean misleading. ``threads`` (default: torch's setting) fixes the
    number of CPU threads while timing; one thread is the steadiest on a machine shared with others.
    """
    ids = _random_ids(model.config.vocab_size, seq_len, batch)
    _check_counts(warmup, runs)
    was_training = model.training
    model.eval()
    with torch.inference_mode(), _threads(threads):
        times = run_times({"model": _forward(model, {"input_ids": ids})}, warmup=warmup, runs=runs)
    model.train(was_training)
    return times["model"]


def interleaved_latency(
    models: dict, seq_len: int, batch: int = 1, runs: int = 5, warmup: int = 1, threads: int | None = None
) -> dict:
    """Forward-pass times of several models on the same ``batch x seq_len`` ids, taking turns.

    ``models`` maps a name to a model. Alternating the models means a busy spell of the machine slows
    them all rather than one of them, so their ratio is fairer. This is :func:`compare_latency` with
    random ids (fixed seed, valid for every model's vocabulary) and the thread setting. Returns
    name -> list of seconds.
    """
    if not models:
        raise ValueError("give at least one model to time, as a dict name -> model")
    vocab = min(model.config.vocab_size for model in models.values())
    ids = _random_ids(vocab, seq_len, batch)
    with _threads(threads):
        return compare_latency(models, {"input_ids": ids}, warmup=warmup, runs=runs)["times"]


def time_call(fn, *args, runs: int = 5, number: int = 10, threads: int | None = None) -> list:
    """Seconds per call of ``fn(*args)``: ``runs`` timings, each the mean of ``number`` calls.

    For small operations (an activation function, one matrix product) that are too quick to time
    one call at a time. One untimed call comes first; no gradients are recorded.
    """
    positive_int(runs, "runs")
    positive_int(number, "number")
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    with torch.inference_mode(), _threads(threads):
        return run_times({"fn": lambda: fn(*args)}, warmup=1, runs=runs, number=number)["fn"]


def median(values) -> float:
    """The median of a non-empty list of numbers."""
    values = list(values)
    if not values:
        raise ValueError("median of an empty list")
    return statistics.median(values)


_threads = threads  # inside the functions whose ``threads`` argument hides the context manager
