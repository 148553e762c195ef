"""What the first cell of every lesson needs: seed, and say what this runs with (installing: ``install``)."""
from __future__ import annotations

import importlib.metadata
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

REPORTED = ("torch", "transformers", "tokenizers", "numpy", "matplotlib", "ipywidgets")


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
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 1024


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
    generator = seed_everything(seed)
    for key, value in versions().items():
        print(f"{key:>14}: {value}")
    print(f"{'seed':>14}: {seed}")
    return generator
