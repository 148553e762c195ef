"""Intervals for the lessons' measurements: a bootstrap over test items, paired where two arms were
scored on the same items, and the mean and spread over seeds.

Everything is deterministic (a seeded generator), so a notebook's intervals reproduce exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = ["Interval", "bootstrap", "paired_bootstrap", "over_seeds"]


@dataclass(frozen=True)
class Interval:
    """An estimate with a (``level``) confidence interval ``[low, high]``."""

    estimate: float
    low: float
    high: float
    level: float = 0.95

    def excludes(self, value: float) -> bool:
        """True when ``value`` lies outside the interval (the effect is distinguishable from it)."""
        return not self.low <= value <= self.high

    def __format__(self, spec: str) -> str:
        """``f"{ci:.2f}"`` gives ``0.51 [0.46, 0.56]``; a leading width (``f"{ci:18.2f}"``) pads the whole."""
        match = re.fullmatch(r"([<>^]?)(\d*)(.*)", spec)
        align, width, number = match.groups()
        number = number or ".3f"
        e, lo, hi = (_unsigned_zero(v, number) for v in (self.estimate, self.low, self.high))
        text = f"{e} [{lo}, {hi}]"
        return f"{text:{align or '>'}{width}}" if width else text


def _unsigned_zero(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``, without the minus sign of a value that rounds to zero (-0.0)."""
    text = format(value, spec)
    try:
        return format(0.0, spec) if float(text.rstrip("%")) == 0 else text
    except ValueError:  # a format whose text is not a number
        return text


def _values(values, name: str) -> torch.Tensor:
    x = torch.as_tensor(values, dtype=torch.float64).flatten()
    if x.numel() < 2:
        raise ValueError(f"{name} needs at least two items, got {x.numel()}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} has a value that is not finite")
    return x


def _check(level: float, resamples: int) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95; got {level}")
    if not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"resamples must be an integer >= 100, got {resamples!r}")


def _interval(
    x: torch.Tensor, statistic: Callable, level: float, resamples: int, seed: int, groups: torch.Tensor | None = None
) -> Interval:
    g = torch.Generator().manual_seed(seed)
    if groups is None:
        idx = torch.randint(len(x), (resamples, len(x)), generator=g)
        stats = torch.stack([statistic(x[i]) for i in idx])
    elif statistic is torch.mean:  # whole groups, the mean of their items: sums and counts, resampled
        _, inverse = torch.unique(groups, return_inverse=True)
        sums = torch.zeros(int(inverse.max()) + 1, dtype=torch.float64).index_add_(0, inverse, x)
        counts = torch.bincount(inverse).double()
        picks = torch.randint(len(counts), (resamples, len(counts)), generator=g)
        stats = sums[picks].sum(1) / counts[picks].sum(1)
    else:  # resample whole groups (e.g. the blanks of one sentence), not items
        ids, inverse = torch.unique(groups, return_inverse=True)
        members = [torch.nonzero(inverse == k).flatten() for k in range(len(ids))]
        picks = torch.randint(len(ids), (resamples, len(ids)), generator=g)
        stats = torch.stack([statistic(x[torch.cat([members[k] for k in row.tolist()])]) for row in picks])
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(stats, q).tolist()
    return Interval(float(statistic(x)), low, high, level)


def bootstrap(
    values,
    statistic: Callable = torch.mean,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    groups: Sequence | None = None,
) -> Interval:
    """Percentile bootstrap interval of ``statistic`` (default: the mean) over the items in ``values``
    (e.g. 1 for a correct answer, 0 for a wrong one). With ``groups`` (one id per item) whole groups
    are resampled, for items that are not independent (blanks of one sentence)."""
    _check(level, resamples)
    x = _values(values, "values")
    grp = None
    if groups is not None:
        grp = torch.as_tensor(list(groups))
        if grp.numel() != x.numel():
            raise ValueError(f"groups needs one id per value: {grp.numel()} ids for {x.numel()} values")
    return _interval(x, statistic, level, resamples, seed, grp)


def paired_bootstrap(
    a, b, *, level: float = 0.95, resamples: int = 2000, seed: int = 0, groups: Sequence | None = None
) -> Interval:
    """Interval of mean(a) - mean(b) for two arms scored on the *same* items (item i of ``a`` and of
    ``b`` is one test case): the items are resampled together, so what both arms share cancels."""
    x, y = _values(a, "a"), _values(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired arms need one value per shared item: {x.numel()} vs {y.numel()}")
    return bootstrap(x - y, level=level, resamples=resamples, seed=seed, groups=groups)


def over_seeds(values) -> tuple[float, float]:
    """Mean and sample standard deviation of one result measured with several seeds."""
    x = _values(values, "values")
    return x.mean().item(), x.std().item()
