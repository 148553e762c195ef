"""Cross-lingual transfer on frozen sentence embeddings (lesson 5): linear probes, the majority
baseline, and zero-shot transfer measured without leakage next to a probe trained in the target
language (on as many prompts, where asked).

Everything takes feature tensors and label lists; :mod:`bertfamily.multilingual` re-exports every
name, as the lesson reads them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import torch

from .heads import fit_full_batch

__all__ = ["majority_baseline", "train_probe", "accuracy", "transfer_table", "transfer_evaluation"]


def majority_baseline(labels: Sequence[str]) -> float:
    """Accuracy of always answering the most frequent label of ``labels`` (the best constant guess)."""
    if not len(labels):
        raise ValueError("labels is empty")
    return Counter(labels).most_common(1)[0][1] / len(labels)


class _Standardise(torch.nn.Module):
    def __init__(self, x: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", x.mean(0))
        self.register_buffer("std", x.std(0).clamp(min=1e-6) if len(x) > 1 else torch.ones(x.shape[1]))

    def forward(self, x):
        return (x - self.mean) / self.std


def train_probe(
    features: torch.Tensor,
    labels: Sequence[str],
    classes: Sequence[str] | None = None,
    hidden: int = 0,
    epochs: int = 100,
    lr: float = 0.01,
    weight_decay: float = 1e-2,
    seed: int = 0,
    standardise: bool = True,
):
    """Fit a classifier on frozen sentence embeddings, full batch with Adam.

    ``hidden=0`` is a linear probe (multinomial logistic regression, zero-initialised, so the seed does
    not matter); ``hidden>0`` a one-hidden-layer head whose initialisation comes from ``seed``.
    With ``standardise`` the features are first centred and scaled by the *training* rows' mean and
    standard deviation (a fixed layer of the returned model, applied unchanged to any test language).
    Returns ``(model, classes)``; predict with :func:`accuracy`.
    """
    if features.ndim != 2 or features.shape[0] != len(labels):
        raise ValueError(f"features must be (n, d) with n = len(labels) = {len(labels)}, got {tuple(features.shape)}")
    classes = sorted(set(labels)) if classes is None else list(classes)
    if len(classes) < 2:
        raise ValueError("need at least two classes")
    index = {c: i for i, c in enumerate(classes)}
    if any(y not in index for y in labels):
        raise ValueError("a label is not in classes")
    y = torch.tensor([index[c] for c in labels])
    g = torch.Generator().manual_seed(seed)
    x = features.detach().float()
    d, k = x.shape[1], len(classes)
    scale = _Standardise(x) if standardise else torch.nn.Identity()
    if hidden:
        first, last = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, k)
        for layer in (first, last):
            bound = layer.in_features**-0.5
            with torch.no_grad():
                layer.weight.uniform_(-bound, bound, generator=g)
                layer.bias.zero_()
        model = torch.nn.Sequential(first, torch.nn.GELU(), last)
    else:
        model = torch.nn.Linear(d, k)
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model = torch.nn.Sequential(scale, model)
    fit_full_batch(model, x, y, opt, epochs)  # the loop of heads.train_linear_head
    model.eval()
    return model, classes


def accuracy(model, classes, features: torch.Tensor, labels: Sequence[str]) -> float:
    """Accuracy of a probe from :func:`train_probe` on ``features`` / ``labels``."""
    if features.shape[0] != len(labels) or not len(labels):
        raise ValueError(f"need one (non-empty) label per row: {features.shape[0]} rows, {len(labels)} labels")
    with torch.no_grad():
        pred = model(features.float()).argmax(-1).tolist()
    return sum(classes[p] == y for p, y in zip(pred, labels, strict=True)) / len(labels)


def transfer_table(
    train_x, train_y, targets: Mapping[str, tuple], hidden: int = 0, seeds: Sequence[int] = (0,), **probe_kwargs
) -> dict:
    """Zero-shot transfer: for each target language, train on the English rows whose topic occurs in
    that language, test on the target rows. ``targets`` maps code -> (features, topics).

    Returns ``{code: {"n", "topics", "majority", "accuracy": [one per seed]}}``.
    """
    if not targets:
        raise ValueError("targets is empty: give {language code: (features, topics)}")
    out = {}
    for lang, (x, y) in targets.items():
        keep = sorted(set(y) & set(train_y))
        if len(keep) < 2:
            raise ValueError(f"{lang}: fewer than two topics shared with the training labels")
        rows = [i for i, t in enumerate(train_y) if t in keep]
        test = [i for i, t in enumerate(y) if t in keep]
        xs, ys = train_x[rows], [train_y[i] for i in rows]
        xt, yt = x[test], [y[i] for i in test]
        accs = []
        for seed in seeds:
            model, classes = train_probe(xs, ys, keep, hidden=hidden, seed=seed, **probe_kwargs)
            accs.append(accuracy(model, classes, xt, yt))
        out[lang] = {
            "n": len(test),
            "train": len(rows),
            "topics": len(keep),
            "majority": majority_baseline(yt),
            "accuracy": accs,
        }
    return out


def _predict(model, classes, x) -> list[str]:
    with torch.no_grad():
        return [classes[i] for i in model(x.float()).argmax(-1).tolist()]


def _subsample(rows, labels, quota: Counter, generator: torch.Generator) -> list[int]:
    """A random subset of ``rows`` with at most ``quota[topic]`` rows of each topic (all, where fewer)."""
    chosen = []
    for topic in sorted(quota):
        of_topic = [i for i in rows if labels[i] == topic]
        order = torch.randperm(len(of_topic), generator=generator)[: quota[topic]].tolist()
        chosen += [of_topic[k] for k in sorted(order)]
    return sorted(chosen)


def _cross_fit(
    train, test, classes, same: bool = False, quotas: dict | None = None, draws: int = 1, seed: int = 0, **probe_kwargs
) -> torch.Tensor:
    """Per test row, the share of probes trained on ``train``'s *other* half (``same``: the same half)
    that label it right: 1.0 or 0.0 with one probe; with ``quotas`` (test half -> rows per topic),
    ``draws`` probes, each trained on a random subset of at most that many rows of each topic."""
    (tx, ty, th), (x, y, h) = train, test
    correct = torch.zeros(len(y))
    generator = torch.Generator().manual_seed(seed)
    for half in (0, 1):
        rows = [i for i, v in enumerate(th) if (v == half) == same and ty[i] in classes]
        tests = [i for i, v in enumerate(h) if v == half]
        if not tests:
            continue
        subsets = [rows] if quotas is None else [_subsample(rows, ty, quotas[half], generator) for _ in range(draws)]
        for chosen in subsets:
            if len({ty[i] for i in chosen}) < 2:
                raise ValueError("a training half has fewer than two topics; the split is too small")
            model, cls = train_probe(tx[chosen], [ty[i] for i in chosen], classes, **probe_kwargs)
            pred = _predict(model, cls, x[tests])
            correct[tests] += torch.tensor([float(p == y[i]) for p, i in zip(pred, tests, strict=True)]) / len(subsets)
    return correct


def transfer_evaluation(
    english: tuple, target: tuple, match_sizes: bool = False, draws: int = 5, seed: int = 0, **probe_kwargs
) -> dict:
    """Zero-shot transfer measured without leakage, next to the in-language probe.

    ``english`` and ``target`` are ``(features, topics, halves)`` (halves from :func:`labelled_halves`).
    Both arms are cross-fitted over the two halves of every topic file: the English-trained probe
    never trains on the half whose translations it is tested on, and the in-language probe is trained
    on the target's other half. Both therefore score the *same* target rows, so their difference is a
    paired comparison. Only topics the target language has are used.

    English usually has more prompts than the target, so with ``match_sizes`` every English-trained
    probe trains on as many prompts of each topic as the in-language probe does (a random subset,
    or all where English has fewer), and its score is the mean over ``draws`` such subsets (seeded by
    ``seed``): the gap then compares languages, not amounts of training data.

    Returns ``{"n", "topics", "majority", "zero_shot", "in_language", "leaky"}``: the last three are
    tensors of one value per target row, 1.0 where the probe labels it right (with ``match_sizes``, the
    share of the draws that do). ``leaky`` is the control: the English probe trained on the *same*
    half as its test rows (as many training rows, but now holding the test prompts' translations), so
    ``leaky - zero_shot`` is what leakage adds.
    """
    (ex, ey, eh), (x, y, h) = english, target
    for name, (f, t, hv) in (("english", english), ("target", target)):
        if not (f.shape[0] == len(t) == len(hv)):
            raise ValueError(
                f"{name}: features, topics and halves need one row each: {f.shape[0]}, {len(t)}, {len(hv)}"
            )
        if set(hv) - {0, 1}:
            raise ValueError(f"{name}: halves must be 0 or 1 (see labelled_halves)")
    if not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    classes = sorted(set(y) & set(ey))
    if len(classes) < 2:
        raise ValueError("fewer than two topics shared by the English and the target rows")
    rows = [i for i, t in enumerate(y) if t in classes]
    x, y, h = x[rows], [y[i] for i in rows], [h[i] for i in rows]
    # the in-language probe that labels test half k trains on the target's half 1 - k
    quotas = {k: Counter(t for t, v in zip(y, h, strict=True) if v != k) for k in (0, 1)} if match_sizes else None
    sizes = {"quotas": quotas, "draws": draws, "seed": seed}
    zero_shot = _cross_fit((ex, ey, eh), (x, y, h), classes, **sizes, **probe_kwargs)
    in_language = _cross_fit((x, y, h), (x, y, h), classes, **probe_kwargs)
    leaky = _cross_fit((ex, ey, eh), (x, y, h), classes, same=True, **sizes, **probe_kwargs)
    return {
        "n": len(y),
        "topics": len(classes),
        "majority": majority_baseline(y),
        "zero_shot": zero_shot,
        "in_language": in_language,
        "leaky": leaky,
    }
