"""The course's budgets, and the verdict of every part of a result against them."""

from __future__ import annotations

#: The budgets of the course (CONTRIBUTING.md): each notebook under 60 s and 1.5 GiB on 2 cores,
#: Binder's 2 GiB limit for reference, ``make test`` within 8 minutes (issue 39), and our masking at
#: least as fast as the transformers collator on the same batch.
BUDGETS = {
    "notebook_wall_s": 60.0,
    "notebook_peak_mib": 1536.0,
    "binder_mib": 2048.0,
    "make_test_s": 480.0,
    "make_test_cpu_s": 720.0,
    "masking_ratio": 1.0,
    "cores": 2,
}


def within(value, budget) -> bool:
    """The budgets say "under": a value equal to its budget is over."""
    return value is not None and value < budget


def notebook_verdict(row: dict, budgets: dict = BUDGETS) -> str:
    """``"within"``, ``"failed"``, or ``"over: time"`` / ``"over: memory"`` / ``"over: time, memory"``."""
    if row.get("status") != "ok":
        return "failed"
    over = [
        what
        for what, key, budget in (
            ("time", "wall_s", "notebook_wall_s"),
            ("memory", "peak_rss_mib", "notebook_peak_mib"),
        )
        if not within(row[key], budgets[budget])
    ]
    return "within" if not over else "over: " + ", ".join(over)


def summarize(result: dict) -> dict:
    """Verdicts of every part of ``result`` against ``result["budgets"]``; added as ``result["summary"]``."""
    budgets = result["budgets"]
    rows = result["notebooks"]
    for row in rows:
        row["verdict"] = notebook_verdict(row, budgets)
    ok = [r for r in rows if r["status"] == "ok"]
    summary = {
        "notebooks": len(rows),
        "within": sum(r["verdict"] == "within" for r in rows),
        "over": [r["notebook"] for r in rows if r["verdict"].startswith("over")],
        "failed": [r["notebook"] for r in rows if r["verdict"] == "failed"],
        "total_wall_s": round(sum(r["wall_s"] for r in rows), 1),
        "max_wall_s": max((r["wall_s"] for r in ok), default=None),
        "max_peak_rss_mib": max((r["peak_rss_mib"] for r in ok), default=None),
    }
    masking = result.get("masking")
    if masking:
        core = masking["ratio"]["collator.torch_mask_tokens"]
        masking["verdict"] = "within" if core >= budgets["masking_ratio"] else "over"
        summary["masking_within"] = masking["verdict"] == "within"
    if result.get("make_test"):  # measured: the whole command's wall time, no estimate
        mt = result["make_test"]
        mt["verdict"] = (
            "within"
            if within(mt["wall_s"], budgets["make_test_s"]) and mt["status"] == "ok"
            else "failed"
            if mt["status"] != "ok"
            else "over"
        )
        summary["make_test_s"] = mt["wall_s"]
        if mt.get("cpu_s") is not None:
            summary["make_test_cpu_min"] = round(mt["cpu_s"] / 60, 1)
            summary["make_test_cpu_within"] = within(mt["cpu_s"], budgets["make_test_cpu_s"])
        summary["make_test_within"] = mt["verdict"] == "within"
    elif result.get("unit_tests") and result.get("book"):
        # not measured: estimated as unit tests + every notebook under nbval + a strict cold build
        parts = [summary["total_wall_s"], result["unit_tests"]["wall_s"], result["book"]["cold"]["wall_s"]]
        summary["make_test_estimate_s"] = round(sum(parts), 1)
        summary["make_test_estimate_within"] = within(summary["make_test_estimate_s"], budgets["make_test_s"])
    summary["all_within"] = (
        not summary["over"]
        and not summary["failed"]
        and summary.get("masking_within", True)
        # a measured `make test` (run on pytest-xdist workers) decides; the
        # estimate (every part one after the other) only when none was measured
        and (
            result["make_test"]["verdict"] == "within"
            if result.get("make_test")
            else summary.get("make_test_estimate_within", True)
        )
    )
    result["summary"] = summary
    return summary
