"""bertfamily.stats: bootstrap intervals, paired and grouped, and the spread over seeds."""

import pytest
import torch

from bertfamily import stats


def test_bootstrap_covers_the_mean_and_is_deterministic():
    x = [1.0] * 30 + [0.0] * 70
    a = stats.bootstrap(x)
    assert a.estimate == pytest.approx(0.3)
    assert a.low < 0.3 < a.high and 0.15 < a.low and a.high < 0.45
    assert stats.bootstrap(x) == a  # seeded: reproduces exactly
    assert a.excludes(0.5) and not a.excludes(0.3)
    assert f"{a:.2f}".startswith("0.30 [")


def test_interval_narrows_with_more_items():
    small = stats.bootstrap([1.0, 0.0] * 20)
    large = stats.bootstrap([1.0, 0.0] * 500)
    assert (large.high - large.low) < (small.high - small.low) / 3


def test_paired_cancels_what_arms_share():
    g = torch.Generator().manual_seed(0)
    item = torch.randn(200, generator=g) * 5  # large per-item difficulty, shared by both arms
    a, b = item + 0.1, item
    paired = stats.paired_bootstrap(a, b)
    assert paired.estimate == pytest.approx(0.1) and paired.high - paired.low < 1e-9 + 1e-6
    unpaired = stats.bootstrap(a)
    assert unpaired.high - unpaired.low > 1  # the difficulty would swamp an unpaired test


def test_groups_widen_the_interval_for_clustered_items():
    # 10 sentences, 20 blanks each; whole sentences are right or wrong
    values = [float(s % 2) for s in range(10) for _ in range(20)]
    groups = [s for s in range(10) for _ in range(20)]
    flat, grouped = stats.bootstrap(values), stats.bootstrap(values, groups=groups)
    assert (grouped.high - grouped.low) > 2 * (flat.high - flat.low)


def test_over_seeds():
    mean, sd = stats.over_seeds([1.0, 2.0, 3.0])
    assert mean == 2.0 and sd == 1.0


@pytest.mark.parametrize("kwargs, match", [({"level": 1.5}, "level"), ({"resamples": 10}, "resamples")])
def test_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        stats.bootstrap([0.0, 1.0], **kwargs)


def test_bad_values():
    with pytest.raises(ValueError, match="at least two"):
        stats.bootstrap([1.0])
    with pytest.raises(ValueError, match="not finite"):
        stats.bootstrap([1.0, float("nan")])
    with pytest.raises(ValueError, match="same\\* items|one value per shared item"):
        stats.paired_bootstrap([1.0, 0.0], [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="one id per value"):
        stats.bootstrap([1.0, 0.0], groups=[0])


def test_format_pads_the_whole_interval():
    ci = stats.Interval(0.5, 0.25, 0.75)
    assert f"{ci:.1f}" == "0.5 [0.2, 0.8]" and f"{ci}" == "0.500 [0.250, 0.750]"
    assert f"{ci:16.1f}" == "  0.5 [0.2, 0.8]" and f"{ci:<16.1f}" == "0.5 [0.2, 0.8]  "
