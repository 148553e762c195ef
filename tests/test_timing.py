"""bertfamily.timing: the one thread switch and the one timing loop (no timing is asserted)."""

import pytest
import torch

from bertfamily import timing


def test_threads_sets_and_restores():
    before = torch.get_num_threads()
    with timing.threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with timing.threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        with timing.threads(0):
            pass


def test_run_times_warms_up_then_interleaves():
    log = []
    calls = {name: (lambda name=name: log.append(name)) for name in "abc"}
    times = timing.run_times(calls, warmup=1, runs=2)
    assert log == list("abc") + list("abc") * 2
    assert {name: len(ts) for name, ts in times.items()} == {"a": 2, "b": 2, "c": 2}
    log.clear()
    timing.run_times(calls, warmup=0, runs=3, rotate=True)
    assert log == list("abc") + list("bca") + list("cab")
    log.clear()
    timing.run_times({"a": calls["a"]}, warmup=0, runs=2, number=3)
    assert log == ["a"] * 6
    with pytest.raises(ValueError, match="runs must be"):
        timing.run_times(calls, runs=0)


def test_the_timers_have_one_home():
    from bertfamily import distillation, quantization, sharing

    for module in (distillation, quantization, sharing):  # the old faces of timing's names are gone
        for name in ("latency", "forward_latency", "time_call", "median", "one_thread", "torch_threads"):
            assert not hasattr(module, name), f"{module.__name__}.{name}"
    before = torch.get_num_threads()
    with timing.threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
