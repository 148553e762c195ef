"""The test suite's times: the unit tests, and the whole ``make test`` with its CPU time and units."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import ROOT
from benchmarks.commands import CpuMeter, timed


def unit_test_time() -> dict:
    """Wall time of the unit tests (what ``make unit`` runs)."""
    result = timed([sys.executable, "-m", "pytest", "tests", "-q", "-m", "not book", "-p", "no:cacheprovider"])
    result["command"] = 'pytest tests -m "not book"'
    return result


#: The README's test command, measured whole by ``--make-test``.
MAKE_TEST = ("make", "test")
#: pytest's closing line: ``==== 803 passed, 3 skipped in 460.21s (0:07:40) ====``.
_PYTEST_CLOSING = re.compile(r"^=+ (?P<counts>.*?) in (?P<seconds>[0-9.]+)s(?: \([0-9:]+\))? =+$")


def pytest_closing(output: str) -> str | None:
    """The counts of pytest's last closing line in ``output`` (``"803 passed, 3 skipped"``), or None."""
    found = [m["counts"] for m in map(_PYTEST_CLOSING.match, output.splitlines()) if m]
    return found[-1] if found else None


def make_test_time(cmd=MAKE_TEST, cwd: Path = ROOT, timeout: int = 3600) -> dict:
    """Wall time of the whole ``make test`` (lint, checks, every test and notebook, the strict build),
    run as a subprocess from ``cwd``: recorded as ``make_test`` with its ``wall_s``, exit status,
    pytest's closing line and the load average before and after (the machine is part of the number).
    ``cmd`` is there for the tests, which time a stand-in instead. ``units``: the seconds each unit of
    work took (a test file, a notebook, a group of files sharing one result), as conftest.py writes
    them; the next `make test` hands out the longest first. ``cpu_s``: the CPU seconds of every process
    the command started (:class:`~benchmarks.commands.CpuMeter`; ``cpu_measure`` says how they were
    counted), which the machine's load moves less than wall time; ``cpu_waited_s``: the processes waited
    for only, what ``time make test`` reports (the sandboxes' and Chromium's helpers are not among them).
    ``units_cpu_s``: the CPU seconds of each unit (its tests' worker process and every process it
    started: conftest.py counts each worker in a cgroup of its own where one can be made, else the
    processes it waited for). ``tests_cpu_s``: the 40 tests that took the most CPU (node id -> seconds of
    their setup, call and teardown, counted as the units are)."""
    start = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    before = [round(x, 2) for x in os.getloadavg()]
    units_file = Path(tempfile.mkdtemp(prefix="bertfamily-units-")) / "units.json"
    env = {**os.environ, "BERTFAMILY_UNIT_TIMES": str(units_file)}  # conftest.py writes each unit's seconds
    meter = CpuMeter()
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=meter.preexec
        )
        rc, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        rc = None
        output = (
            (expired.stdout or b"").decode(errors="replace")
            if isinstance(expired.stdout, bytes)
            else (expired.stdout or "")
        )
        output += f"\ntimed out after {timeout} s"
    wall = round(time.perf_counter() - t0, 2)
    cpu, waited = round(meter.seconds(), 1), round(meter.waited_seconds(), 1)
    meter.close()
    try:
        units, units_cpu, tests_cpu = (
            json.loads(units_file.with_suffix(suffix).read_text(encoding="utf-8"))
            for suffix in (".json", ".cpu.json", ".tests.json")
        )
    except (OSError, ValueError):
        units = units_cpu = tests_cpu = None  # a stand-in command, or a run that ended before pytest did
    finally:
        shutil.rmtree(units_file.parent, ignore_errors=True)
    return {
        "command": " ".join(cmd),
        "date": start,
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_measure": meter.measure,
        "cpu_waited_s": waited,
        "returncode": rc,
        "status": "ok" if rc == 0 else "failed",
        "pytest": pytest_closing(output),
        "loadavg_before": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "output_tail": None if rc == 0 else output[-1500:],
        "units": units,
        "units_cpu_s": units_cpu,
        "tests_cpu_s": tests_cpu,
    }
