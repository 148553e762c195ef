"""One figure style for the whole book: call :func:`use_style` once, then plot as usual."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt

#: Colours by role, so that "BERT", "student", "static"... look the same in every lesson.
COLORS = {
    "teacher": "#1f4e79",
    "bert": "#1f4e79",
    "static": "#c0504d",
    "student": "#e07b39",
    "distilbert": "#e07b39",
    "dynamic": "#2e8b57",
    "albert": "#7b5ea7",
    "int8": "#8c8c8c",
    "neutral": "#4d4d4d",
    "highlight": "#d62728",
    "alternating": "#17becf",  # XLM's MLM+TLM (lesson 6)
    # the parts of a parameter budget (lessons 3 and 4)
    "embeddings": "#b8860b",
    "layers": "#e07b39",
    "pooler": "#4d4d4d",
}
CYCLE = ["#1f4e79", "#e07b39", "#2e8b57", "#c0504d", "#7b5ea7", "#8c8c8c", "#17becf"]

STYLE = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "figure.autolayout": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "legend.frameon": False,
    "font.size": 10,
    "axes.prop_cycle": mpl.cycler(color=CYCLE),
    "image.cmap": "viridis",
}


def use_style() -> None:
    """Apply the course's matplotlib style (small, light, labelled) to every later figure."""
    mpl.rcParams.update(STYLE)


def bar_labels(ax, fmt: str = "{:,.0f}", **kwargs) -> None:
    """Write each bar's value on top of it."""
    for container in ax.containers:
        ax.bar_label(container, labels=[fmt.format(v) for v in container.datavalues], fontsize=8, padding=2, **kwargs)


__all__ = ["COLORS", "CYCLE", "STYLE", "use_style", "bar_labels", "plt"]
