"""The course's committed measurements (time and memory of every lesson), and how the book shows them.

``make bench`` (``benchmarks/run.py``) measures and writes :data:`RESULTS`; it is package data, so
the appendix page "Running this course" shows the same numbers on Colab or from a bare download
as in a clone of the repository.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

#: The version of the result's layout; :func:`load_results` refuses any other.
SCHEMA = 1
#: The committed result, shipped inside the package.
RESULTS = Path(str(files("bertfamily") / "results" / "benchmark.json"))
#: The parts a complete ``make bench`` fills in (a partial run leaves some ``None``).
PARTS = ("masking", "book", "make_test")


def load_results(path=RESULTS, complete: bool = False) -> dict:
    """Read a result written by ``make bench`` (checks the schema; ``complete``: every part is there)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark result at {path}: run `make bench` in a clone of the course")
    result = json.loads(path.read_text(encoding="utf-8"))
    schema = result.get("schema") if isinstance(result, dict) else None
    if schema != SCHEMA:
        raise ValueError(
            f"{path} has schema {schema!r}; this code reads schema {SCHEMA}: regenerate it with `make bench`"
        )
    missing = [part for part in PARTS if not result.get(part)]
    if complete and missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}: run the whole `make bench`")
    return result


def _fmt(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def notebook_table(result: dict) -> str:
    """The markdown table of the notebooks, with budgets and verdicts."""
    b = result["budgets"]
    lines = [
        "| notebook | wall time (s) | budget (s) | peak memory (MiB) | budget (MiB) | verdict |",
        "|---|--:|--:|--:|--:|---|",
    ]
    for r in result["notebooks"]:
        lines.append(
            f"| {Path(r['notebook']).stem} | {_fmt(r['wall_s'], '.1f')} | {b['notebook_wall_s']:.0f} "
            f"| {_fmt(r['peak_rss_mib'], ',.0f')} | {b['notebook_peak_mib']:,.0f} | {r['verdict']} |"
        )
    s = result["summary"]
    lines.append(
        f"| **all {s['notebooks']}** | **{s['total_wall_s']:.1f}** (sum) | | "
        f"**{_fmt(s['max_peak_rss_mib'], ',.0f')}** (max) | | **{s['within']} of {s['notebooks']} within** |"
    )
    return "\n".join(lines)


def masking_table(masking: dict) -> str:
    """The markdown table of the masking throughput comparison."""
    lines = ["| implementation | median time (ms) | tokens per second | bertfamily is faster by |", "|---|--:|--:|--:|"]
    for name, seconds in masking["median_s"].items():
        ratio = masking["ratio"].get(name)
        lines.append(
            f"| `{name}` | {1e3 * seconds:.2f} | {masking['tokens_per_s'][name]:,.0f} "
            f"| {'–' if ratio is None else f'{ratio:.2f}×'} |"
        )
    return "\n".join(lines)


def plot(result: dict):
    """Time and peak memory per notebook against the budgets (and Binder's limit); returns the figure."""
    from bertfamily.plots import COLORS, bar_labels, plt, use_style

    use_style()
    rows, b = result["notebooks"], result["budgets"]
    names = [Path(r["notebook"]).stem for r in rows][::-1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 0.35 * len(rows) + 1.6), sharey=True)
    panels = (
        (left, "wall_s", "notebook_wall_s", "time", "wall time (s)", "Time per notebook"),
        (right, "peak_rss_mib", "notebook_peak_mib", "memory", "peak memory (MiB)", "Peak memory per notebook"),
    )
    for ax, key, budget, what, label, title in panels:
        values = [r[key] for r in rows][::-1]
        colors = [
            COLORS["highlight"] if r["verdict"] == "failed" or what in r["verdict"] else COLORS["dynamic"] for r in rows
        ][::-1]
        ax.barh(names, values, color=colors)
        bar_labels(ax)
        ax.axvline(b[budget], color=COLORS["neutral"], linestyle="--", label="budget")
        ax.set(xlabel=label, title=title)
    right.axvline(b["binder_mib"], color=COLORS["bert"], linestyle=":", label="Binder's limit")
    for ax, key, limit in ((left, "wall_s", b["notebook_wall_s"]), (right, "peak_rss_mib", b["binder_mib"])):
        ax.set_xlim(0, 1.3 * max([limit] + [r[key] for r in rows]))  # room for the labels and legend
        ax.legend(loc="best", fontsize=8)
    return fig
