"""The course's benchmark: how long each lesson takes, how much memory it needs, and the hot spots.

    python -m benchmarks.run [NB ...] [--skip-book] [--skip-masking] [--skip-unit] [--make-test]
                             [--cores N] [--strict] [--out lib/bertfamily/results/benchmark.json]
    python -m benchmarks.run --add-grading N [--scheduler local|ADDRESS]
    python -m benchmarks.run --page-weights _build/html

from the repository root (``python benchmarks/run.py ...`` there runs the same). ``make bench`` runs it
over every notebook of ``_toc.yml``, then re-executes the appendix page ``book/running.ipynb``, which
reads the result. Each measurement is a module of the package ``benchmarks``; this one is the command.
What it measures, one step after the other:

* **Each notebook** in a fresh kernel, one at a time, offline (``HF_HUB_OFFLINE=1``), on at most
  ``--cores`` CPUs: the wall time from kernel start to kernel shutdown, and the peak resident memory
  of the kernel's whole process tree (see :class:`benchmarks.memory.TreePeak`). The notebook is read into
  memory and executed there; the file on disk is never written. A notebook that fails is recorded as failed
  and the run goes on; the script then exits with status 1.
* **Masking**: ``bertfamily.masking.mask_tokens`` against transformers'
  ``DataCollatorForLanguageModeling`` on the same batch of real BBC word pieces with the same
  probability, timed in turn (interleaved) many times; medians, tokens per second and ratios.
* **The book**: ``jupyter-book build`` into an empty temporary folder (cold), then again with
  nothing changed (rebuild); and the weight of every page of the cold build
  (:func:`benchmarks.book.page_weights`: its HTML, the site's files it loads, its browser widgets, any
  address outside the site).
* **The unit tests** (``pytest tests -m "not book"``).
* **The course model in the browser** (``--skip-browser`` leaves it out): lesson 1's own-sentence box on a
  minimal page in headless Chromium, offline: the bytes of the reader's first request, the time from it to
  the first guesses, and each guess after (:func:`benchmarks.browser.browser_fill_times`).
* **``make test`` itself** (``--make-test``; ``make bench`` passes it): the README's whole test
  command run as a subprocess from the repository root, on the same cores, its wall time recorded as
  ``make_test`` with ``wall_s``, its exit status and pytest's closing line. Without it the summary
  falls back to an estimate from the parts (every notebook + the unit tests + a cold build).

It writes ``--out`` (JSON) and the same name with ``.md`` (a markdown table with the budgets and
a verdict per row). Timings depend on the machine and on what else runs on it: the machine facts,
including the load average before, during and after, are part of the result.
"""

from __future__ import annotations

if __name__ == "__main__" and not __package__:
    # `python benchmarks/run.py` puts benchmarks/ first on sys.path, not the repository that holds the
    # package: the command runs again as the module it is (python -m benchmarks.run), from the root
    import os
    import sys

    if os.path.realpath(os.getcwd()) != os.path.dirname(os.path.dirname(os.path.realpath(__file__))):
        sys.exit("run the benchmark from the repository root: python -m benchmarks.run ...")
    os.execv(sys.executable, [sys.executable, "-m", "benchmarks.run", *sys.argv[1:]])

import argparse
import os
import sys
from pathlib import Path

from benchmarks.book import book_build_times, page_weight_table, page_weights
from benchmarks.browser import CHROMIUM, browser_fill_record
from benchmarks.grading import cluster_grading_time, grading_time
from benchmarks.machine import limit_cores, machine, reference_cpu_s
from benchmarks.masking import masking_batch, masking_comparison
from benchmarks.notebooks import code_cells, relative_name, run_notebook
from benchmarks.report import markdown, write_results
from benchmarks.suite import make_test_time, unit_test_time
from benchmarks.verdicts import BUDGETS, summarize
from bertfamily.measurements import RESULTS, SCHEMA, load_results
from tools.nb import toc_notebooks

#: Parts measured on their own (``--add-grading``), which a whole run keeps from the previous result.
SEPARATE = ("grading", "grading_cluster")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: every notebook of _toc.yml)")
    parser.add_argument(
        "--out",
        default=str(RESULTS),
        help="the JSON result; the markdown table goes next to it (default: the committed result, "
        "lib/bertfamily/results/benchmark.json, package data that the appendix page reads)",
    )
    parser.add_argument("--skip-book", action="store_true", help="do not time the book's builds")
    parser.add_argument("--skip-masking", action="store_true", help="do not compare the masking functions")
    parser.add_argument("--skip-unit", action="store_true", help="do not time the unit tests")
    parser.add_argument(
        "--skip-browser",
        action="store_true",
        help="do not time the course model in Chromium (lesson 1's own-sentence box)",
    )
    parser.add_argument(
        "--make-test",
        action="store_true",
        help="also time the whole `make test` as a subprocess, recorded as make_test (make bench "
        "passes it; about 8 minutes)",
    )
    parser.add_argument(
        "--cores",
        type=int,
        default=BUDGETS["cores"],
        help=f"run on at most this many CPUs (default {BUDGETS['cores']}, the budget's machine; 0: all)",
    )
    parser.add_argument("--interval", type=float, default=0.05, help="memory sampling interval in seconds")
    parser.add_argument("--strict", action="store_true", help="exit with status 2 when anything is over budget")
    parser.add_argument(
        "--add-grading",
        type=int,
        metavar="N",
        help="only time the grader on a class of N honest submissions (2 jobs) and add that to "
        "the existing --out (about 25 s a submission on 2 cores)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --add-grading: grade the class with --jobs 2 here and through this Dask "
        "cluster ('local': one started here with 2 workers) and record the overhead",
    )
    parser.add_argument(
        "--page-weights",
        metavar="HTML",
        help="only measure the pages' weight of a built site (e.g. _build/html, after make book) "
        "and print it; nothing is run or written",
    )
    args = parser.parse_args(argv)
    if args.page_weights:
        try:
            weights = page_weights(Path(args.page_weights))
        except ValueError as err:
            parser.error(str(err))
        print(page_weight_table(weights))
        return 0
    if args.scheduler and args.add_grading is None:
        parser.error("--scheduler goes with --add-grading N")
    if args.scheduler:
        result = load_results(args.out)
        g = result["grading_cluster"] = cluster_grading_time(args.add_grading, 2, args.scheduler)
        write_results(result, Path(args.out))
        print(
            f"grading {g['submissions']} submissions: --jobs 2 {g['local']['wall_s']:.0f} s, --scheduler "
            f"{g['scheduler']} {g['cluster']['wall_s']:.0f} s: ratio {g['ratio']:.2f}, "
            f"{g['overhead_per_submission_s']:+.2f} s a submission, same gradebook: {g['same_gradebook']}"
        )
        return 0 if g["status"] == "ok" else 1
    if args.add_grading is not None:
        result = load_results(args.out)
        result["grading"] = grading_time(args.add_grading)
        write_results(result, Path(args.out))
        print(
            f"grading: {result['grading']['submissions']} submissions, {result['grading']['jobs']} jobs, "
            f"{result['grading']['wall_s']:.0f} s, {result['grading']['full_marks']} with full marks"
        )
        return 0 if result["grading"]["status"] == "ok" else 1
    if args.cores < 0:
        parser.error(f"--cores must be 0 (all) or a positive number, got {args.cores}")
    if args.interval <= 0:
        parser.error(f"--interval must be a positive number of seconds, got {args.interval}")
    if not args.out.endswith(".json"):
        parser.error(f"--out must name a .json file, got {args.out}")
    paths = [Path(p).resolve() for p in args.notebooks] or toc_notebooks()
    bad = [str(p) for p in paths if p.suffix != ".ipynb" or not p.is_file()]
    if bad:
        parser.error(f"not notebook files (.ipynb): {', '.join(bad)}")

    import nbformat
    from tqdm.auto import tqdm

    limit_cores(args.cores or None)
    from bertfamily import kernels

    os.environ.update(kernels.pinned_environ())  # as make test and the committed outputs (before torch)
    os.environ["HF_HUB_OFFLINE"] = "1"  # the budgets are for an offline run; kernels inherit this
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = {
        "schema": SCHEMA,
        "budgets": dict(BUDGETS),
        "machine": machine(),
        "sample_interval_s": args.interval,
        "notebooks": [],
        "masking": None,
        "book": None,
        "unit_tests": None,
        "browser_fill": None,
        "make_test": None,
    }
    total = sum(code_cells(nbformat.read(p, as_version=4)) for p in paths)
    with tqdm(total=total, unit="cell", desc="notebooks", dynamic_ncols=True) as bar:
        for path in paths:
            bar.set_description(path.stem)
            row = run_notebook(path, interval=args.interval, progress=bar)
            result["notebooks"].append(row)
            bar.write(
                f"{row['notebook']:<36} {row['status']:<6} {row['wall_s']:7.1f} s "
                f"{row['peak_rss_mib']:8.0f} MiB"
                + (f"  {row['error']}" if row["error"] else "")
                + (f"  (stalled once: {row['stalled']})" if row["stalled"] else "")
            )
    steps = [
        ("masking", not args.skip_masking, lambda: masking_comparison(*masking_batch())),
        ("book", not args.skip_book, book_build_times),
        ("unit_tests", not args.skip_unit, unit_test_time),
        ("browser_fill", not args.skip_browser and CHROMIUM.is_file(), browser_fill_record),
        ("make_test", args.make_test, make_test_time),
    ]
    for key, _wanted, step in tqdm([s for s in steps if s[1]], desc="other measurements", unit="step"):
        result[key] = step()
    result["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    result["machine"]["reference_cpu_s_after"] = reference_cpu_s()
    if Path(args.out).is_file():  # the gradings take half an hour each: kept until measured again
        previous = load_results(args.out)
        result.update({key: previous[key] for key in SEPARATE if previous.get(key)})
    summary = summarize(result)
    out, md = write_results(result, Path(args.out))
    print(markdown(result))
    print(f"wrote {relative_name(out)} and {relative_name(md)}")
    failed = (
        summary["failed"]
        or any(result[k] and result[k].get("status") == "failed" for k in ("unit_tests", "browser_fill", "make_test"))
        or (result["book"] and "failed" in (result["book"]["cold"]["status"], result["book"]["rebuild"]["status"]))
    )
    if failed:
        return 1
    return 2 if args.strict and not summary["all_within"] else 0


if __name__ == "__main__":
    sys.exit(main())
