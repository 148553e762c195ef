"""What the first cell of every lesson needs: seed, and say what this runs with (installing: ``install``);
and :func:`release_memory`, which a lesson calls after it drops a large model."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import random
import sys

import numpy as np
import torch

from bertfamily import kernels

# install_requirements moved to bertfamily.install (which imports no torch); re-exported here because
# the Colab cell of every notebook up to ebf0b29 does `from bertfamily.env import install_requirements`.
from bertfamily.install import install_requirements, on_colab  # noqa: F401

#: The widest output line the book's column shows without cutting it off: a text output box is 666 px
#: wide at the browser tests' 1280 px viewport, 75 characters of its 14 px monospace font
#: (tests/test_pages.py checks every lesson's outputs against it).
OUTPUT_WIDTH = 75
REPORTED = ("torch", "transformers", "tokenizers", "numpy", "matplotlib", "ipywidgets")
#: Loggers whose lines at import time tell a reader nothing: torchao (which transformers imports
#: whenever it is installed) logs each of its CUDA kernels that a CPU build of torch cannot load,
#: and torch logs a deprecation aimed at torchao's developers. :func:`report` quiets them.
IMPORT_NOISE = ("torchao", "torch.utils._pytree")


def quiet_import_noise() -> None:
    """Show only errors from the loggers of :data:`IMPORT_NOISE` (for the rest of this process)."""
    for name in IMPORT_NOISE:
        logging.getLogger(name).setLevel(logging.ERROR)


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and torch; return a ``torch.Generator`` seeded the same way."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def peak_memory_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux and macOS)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def release_memory() -> None:
    """Hand the memory that freed tensors leave behind back to the operating system.

    After a lesson drops a large model (``del model`` or ``model = None``), glibc keeps the freed
    pages for later allocations, so the process's resident memory stays at its peak. This runs the
    garbage collector, then glibc's ``malloc_trim(0)``, which returns the free pages. Where the C
    library has no ``malloc_trim`` (macOS, Windows, musl), it only collects garbage. It returns
    nothing, so that a lesson's cell that ends with it shows nothing (:func:`trim_memory` says
    whether the pages were trimmed).
    """
    trim_memory()


def trim_memory() -> bool:
    """What :func:`release_memory` does; returns whether the C library trimmed the free pages."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # no C library by that name, or none with malloc_trim
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)
    return True


def versions() -> dict:
    """Python, platform and the versions of the libraries the lessons use."""
    found = {"python": platform.python_version(), "platform": platform.platform(terse=True)}
    for name in REPORTED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    found["bertfamily"] = importlib.metadata.version("bertfamily")
    found["torch threads"] = torch.get_num_threads()
    found["kernels"] = f"{torch.backends.cpu.get_cpu_capability()}, {kernels.describe().split(';')[0]}"
    found["cuda"] = torch.cuda.is_available()
    found["colab"] = on_colab()
    return found


def report(seed: int = 0) -> torch.Generator:
    """Seed everything, print the versions this lesson runs with, and return the seeded generator."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    quiet_import_noise()
    generator = seed_everything(seed)
    import textwrap

    for key, value in [*versions().items(), ("seed", seed)]:
        # wrapped to the book's output column (OUTPUT_WIDTH), under the value's first line
        print(textwrap.fill(f"{key:>14}: {value}", OUTPUT_WIDTH, subsequent_indent=" " * 16))
    return generator
