"""The machine the timings were taken on, and the cores they may use."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """The facts a reader needs to judge the timings: CPU, cores, memory, versions, date, load."""
    import importlib.metadata

    import psutil
    import torch

    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cores_used": affinity,
        "torch_threads": torch.get_num_threads(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": importlib.metadata.version("transformers"),
        "offline": os.environ.get("HF_HUB_OFFLINE") == "1",
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "reference_cpu_s": reference_cpu_s(),
    }


#: A fixed piece of work, the same on every run: matrix products on one thread, and a Python loop.
REFERENCE_WORK = """
import time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
a = torch.randn(256, 256)
start = time.process_time()
for _ in range(4000):
    b = a @ a
sum(range(3_000_000))
print(time.process_time() - start)
"""


def reference_cpu_s() -> float:
    """The CPU seconds of :data:`REFERENCE_WORK` in a fresh process: the same work on a machine that is slower
    at this hour (a host shared with others) takes more, so two benches' CPU figures compare through it."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", REFERENCE_WORK], capture_output=True, text=True, timeout=600, check=True
    )
    return round(float(done.stdout.split()[-1]), 2)


def limit_cores(n: int | None) -> None:
    """Run this process and every kernel it starts on at most ``n`` of the CPUs it may use."""
    if n is None or not hasattr(os, "sched_setaffinity"):
        return
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"cores must be a positive integer, got {n!r}")
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:n])
