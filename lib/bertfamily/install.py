"""Installing the course where it is not installed yet (Colab's first cell). Imports no torch.

The Colab cell installs this package with ``--no-deps`` and then :func:`install_requirements`, so
that Colab's own torch is kept; importing this module must not start torch, because the numerical
kernels are pinned (:func:`bertfamily.kernels.pin`) before torch starts.
"""
from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys


def on_colab() -> bool:
    """True inside a Google Colab kernel."""
    return "google.colab" in sys.modules


def requirements(skip: tuple = ("torch",)) -> list[str]:
    """The course's runtime dependencies, read from the installed package's own metadata.

    This is the one dependency list (``pyproject.toml``); ``skip`` leaves out packages the host
    already provides (Colab ships its own torch, which a pinned CPU wheel must not replace).
    """
    out = []
    for req in importlib.metadata.requires("bertfamily") or []:
        if "extra ==" in req:
            continue
        name = re.split(r"[ <>=!~;\[(]", req, maxsplit=1)[0].lower()
        if name not in skip:
            out.append(req.split(";")[0].strip())
    return out


def install_requirements(skip: tuple = ("torch",)) -> None:
    """pip-install :func:`requirements` quietly (used by the Colab cell after a ``--no-deps`` install)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *requirements(skip)], check=True)
