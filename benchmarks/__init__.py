"""The course benchmark (``python benchmarks/run.py``, ``make bench``); see run.py."""
