"""The course benchmark (``python -m benchmarks.run``, ``make bench``): one module per measurement, run.py the command.

memory      the peak memory of a process tree (TreePeak)
notebooks   a notebook run in a fresh kernel, timed, its memory sampled
masking     bertfamily's masking against transformers' collator
commands    a command timed: wall time, status, CPU time of finished children
book        the book's build times and the weight of its pages
suite       the unit tests and the whole ``make test``, timed
grading     regrading a class, alone and through a Dask cluster
browser     lesson 1's own-sentence box timed in headless Chromium
machine     the machine the timings were taken on
verdicts    the budgets, and the verdict of every part against them
report      the result written as JSON and as markdown
run         the command line (``python -m benchmarks.run``)
"""

from pathlib import Path

#: The repository's root: the book, its notebooks and the commands the benchmark times are found from it.
ROOT = Path(__file__).resolve().parents[1]
