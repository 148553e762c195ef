"""Writing a result: JSON, and the same result as a markdown page."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.book import page_weight_table

# what the book shows lives in the package (the appendix page reads it on Colab too)
from bertfamily.measurements import masking_table, notebook_table

#: How ``make_test``'s ``cpu_s`` was counted (benchmarks.commands.CpuMeter), in the report's words.
CPU_MEASURES = {
    "cgroup": "counted by a cgroup of its own, the sandboxes' and the browser's processes included",
    "waited-for processes": "the processes waited for only: the sandboxes' and the browser's are left out",
}


def markdown(result: dict) -> str:
    """The whole result as a markdown page (``results.md``)."""
    m, s, b = result["machine"], result["summary"], result["budgets"]
    after = m.get("loadavg_after")
    out = [
        "# Benchmark: time and memory of every lesson",
        "",
        f"Measured {m['date']} on {m['cpu_model']}, {m['cores_used']} of {m['cpu_count']} cores used, "
        f"{m['torch_threads']} torch threads, {m['memory_gib']} GiB; Python {m['python']}, torch {m['torch']}, "
        f"transformers {m['transformers']}{', offline' if m['offline'] else ''}. Load average (1, 5, 15 min) "
        f"{m['loadavg_before']} before, {after} after: on a machine shared with other work the times are "
        "inflated. Regenerate with `make bench`."
        + (
            f" A fixed workload (`benchmarks.machine.REFERENCE_WORK`, one thread) took {m['reference_cpu_s']:.2f} s "
            f"of CPU before and {m.get('reference_cpu_s_after', float('nan')):.2f} s after: the same work costs "
            "more CPU where the host is busier, so compare two benches' CPU figures through it."
            if m.get("reference_cpu_s")
            else ""
        ),
        "",
        f"Each notebook runs in a fresh kernel; wall time from kernel start to shutdown; peak memory is the "
        f"largest resident memory of the kernel's whole process tree (RSS; with worker processes, the "
        f"sum of their proportional set sizes, each shared page once), sampled every "
        f"{result['sample_interval_s']} s, or the kernel's own recorded peak if larger. Budgets: under "
        f"{b['notebook_wall_s']:.0f} s and {b['notebook_peak_mib']:,.0f} MiB (1.5 GiB) per notebook on "
        f"{b['cores']} cores; Binder allows {b['binder_mib']:,.0f} MiB.",
        "",
        notebook_table(result),
        "",
    ]
    for r in result["notebooks"]:
        if r["error"]:
            out.append(f"- {Path(r['notebook']).stem} failed: `{r['error']}`")
    if s["over"] or s["failed"]:
        out += [f"Over budget: {', '.join(s['over']) or 'none'}. Failed: {', '.join(s['failed']) or 'none'}.", ""]
    masking = result.get("masking")
    if masking:
        core = masking["ratio"]["collator.torch_mask_tokens"]
        out += [
            "## Masking throughput",
            "",
            f"The same batch ({masking['batch'][0]} × {masking['batch'][1]} word pieces of BBC articles), "
            f"probability {masking['probability']}, {masking['repeats']} interleaved timings each, medians, "
            f"{masking['torch_threads']} torch threads.",
            "",
            masking_table(masking),
            "",
            f"Budget: `bertfamily.masking` at least {b['masking_ratio']:.1f}× the collator's masking step: "
            f"{core:.2f}×, {masking['verdict']}.",
            "",
        ]
    book = result.get("book")
    if book:
        out += [
            "## Building the book",
            "",
            "| build | wall time (s) | status |",
            "|---|--:|---|",
            f"| cold (empty output folder, {book['cold'].get('pages', '?')} pages) | {book['cold']['wall_s']:.1f} "
            f"| {book['cold']['status']} |",
            f"| rebuild (nothing changed) | {book['rebuild']['wall_s']:.1f} | {book['rebuild']['status']} |",
            "",
        ]
        if book["cold"].get("weights"):
            out += [
                "### The pages' weight",
                "",
                "Bytes of each page's HTML and of the site's files it loads as it opens (scripts, stylesheets, "
                "images; fonts named by stylesheets and what scripts fetch later are not counted); the "
                "browser widgets' share of the HTML; addresses outside the site it names.",
                "",
                page_weight_table(book["cold"]["weights"]),
                "",
            ]
    fill = result.get("browser_fill")
    if fill:
        out += [
            "## The course model in the browser",
            "",
            f"Lesson 1's own-sentence box in headless Chromium {fill['browser']}, offline, on a minimal page "
            f"with its script ({fill['page_bytes']:,} bytes with the page's style): the reader's first request "
            f"downloads {fill['download_bytes']:,} bytes ({', '.join(fill['downloaded'])}) and shows the first "
            f"five guesses after {fill['first_guess_s']:.2f} s (download and parsing {fill['load_s']:.2f} s); "
            f"each guess after it takes {fill['median_guess_s']:.2f} s (median of {len(fill['guess_s'])}, "
            f"at most {max(fill['guess_s']):.2f} s); {fill['status']}.",
            "",
        ]
    unit = result.get("unit_tests")
    if unit:
        out += [f"Unit tests (`{unit['command']}`): {unit['wall_s']:.1f} s, {unit['status']}.", ""]
    if "make_test_estimate_s" in s:
        out += [
            f"`make test`, estimated as unit tests + every notebook + a cold build: "
            f"{s['make_test_estimate_s']:.0f} s (budget {b['make_test_s']:.0f} s): "
            f"{'within' if s['make_test_estimate_within'] else 'over'}.",
            "",
        ]
    if result.get("make_test"):
        mt = result["make_test"]
        out += [
            f"`{mt['command']}`, measured (the whole command, {m['cores_used']} cores): {mt['wall_s']:.0f} s "
            f"(budget {b['make_test_s']:.0f} s), {mt['status']}"
            + (f" ({mt['pytest']})" if mt.get("pytest") else "")
            + f": {mt['verdict']}."
            + (
                f" CPU time of every process it started (user + system, "
                f"{CPU_MEASURES.get(mt.get('cpu_measure'), CPU_MEASURES['waited-for processes'])}): "
                f"{mt['cpu_s'] / 60:.1f} minutes "
                f"(budget {b['make_test_cpu_s'] / 60:.0f}), a figure the machine's load moves less than wall time"
                + (
                    f"; {mt['cpu_waited_s'] / 60:.1f} minutes of it in processes waited for, what "
                    "`time make test` reports."
                    if mt.get("cpu_measure") == "cgroup" and mt.get("cpu_waited_s") is not None
                    else "."
                )
                if mt.get("cpu_s") is not None
                else ""
            )
            + (
                f" Load average {mt['loadavg_before']} before, {mt['loadavg_after']} after."
                if mt.get("loadavg_before")
                else ""
            ),
            "",
        ]
        if mt.get("units_cpu_s"):
            top = list(mt["units_cpu_s"].items())[:8]
            out += [
                "Where its CPU went, by unit of work (CPU seconds of the test workers and "
                + (
                    "every process they started, each worker counted by a cgroup of its own): "
                    if mt.get("cpu_measure") == "cgroup"
                    else "the processes they waited for; the sandboxes' and Chromium's are not among them): "
                )
                + ", ".join(f"{unit} {cpu:.0f}" for unit, cpu in top)
                + f"; all units {sum(mt['units_cpu_s'].values()):.0f}.",
                "",
            ]
    if result.get("grading"):
        g = result["grading"]
        out += [
            f"Regrading a class (`{g['command']}`{_measured(g)}): {g['wall_s']:.0f} s, {g['per_submission_s']} s "
            f"a submission, {g['full_marks']} of {g['submissions']} with full marks, {g['status']}.",
            "",
        ]
    if result.get("grading_cluster"):
        g = result["grading_cluster"]
        out += [
            f"Regrading a class through a Dask cluster (`--scheduler {g['scheduler']}`{_measured(g['local'])}) "
            f"against `--jobs "
            f"{g['jobs']}` on the same machine, {g['submissions']} submissions: {g['cluster']['wall_s']:.0f} s "
            f"against {g['local']['wall_s']:.0f} s, a ratio of {g['ratio']:.2f} "
            f"({g['overhead_per_submission_s']:+.2f} s a submission); the same gradebook: "
            f"{'yes' if g['same_gradebook'] else 'no'}; {g['status']}.",
            "",
        ]
    return "\n".join(out)


def _measured(timed: dict) -> str:
    """ ", measured DATE" for a grading run that records its date (``--add-grading`` runs apart from the rest)."""
    return f", measured {timed['date']}" if timed.get("date") else ""


def write_results(result: dict, out: Path) -> tuple[Path, Path]:
    """Write ``result`` as JSON to ``out`` and as markdown next to it (same name, ``.md``)."""
    out = Path(out)
    if out.suffix != ".json":
        raise ValueError(f"--out must name a .json file, got {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md = out.with_suffix(".md")
    md.write_text(markdown(result) + "\n", encoding="utf-8")
    return out, md
