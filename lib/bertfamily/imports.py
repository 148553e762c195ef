"""A faster start for the course's own processes that read notebooks: the grader and each run's
nbval worker, the tools, pytest (``-p bertfamily.imports``, set in pyproject.toml).

nbformat validates with jsonschema, and jsonschema imports the optional IRI checker
``rfc3987_syntax`` wherever it is installed (jupyter-events, which JupyterLab's server uses, asks for
it). That module builds a parser from its grammar at import: about 2 s of CPU in every process, and
the grader starts one such process per submission. Nothing these processes validate has an IRI
format, so they go without the checker (jsonschema then simply does not check that format).
Importing this module is all it takes; a lesson's kernel never imports it.
"""

from __future__ import annotations

import sys

#: Optional modules that cost seconds at import and that nothing in these processes uses.
SKIPPED = ("rfc3987_syntax",)


def skip_slow_optional_imports() -> None:
    """Make ``import`` of each :data:`SKIPPED` module fail (ImportError), as if it were not installed,
    unless it is already imported."""
    for name in SKIPPED:
        sys.modules.setdefault(name, None)


skip_slow_optional_imports()
