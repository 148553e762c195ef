"""Root pytest configuration: applies to the unit tests and to the notebooks nbval collects."""

import os
import sys

import pytest

from bertfamily import kernels

# Pin the numerical kernels before anything imports torch: this process, the pytest-xdist workers
# and every notebook kernel nbval starts inherit the environment (bertfamily.kernels says why).
if "torch" not in sys.modules:
    os.environ.update(kernels.pinned_environ(shared_cores=True))  # workers and kernels share 2 cores
KERNEL_MODE = kernels.mode()

# nbval waits only 5 s for a cell's output messages after the cell has finished; a kernel that is
# still flushing many progress-bar updates on a busy 2-core machine can take longer than that.
NBVAL_OUTPUT_TIMEOUT_S = 60


def pytest_report_header(config):
    return f"numerical kernels: {kernels.describe()}"


def _tolerant(original, abs_tol, rel_tol, any_text=False):
    """nbval's comparison, after numbers within the cell's stated tolerance are taken as equal."""

    def compare_outputs(test, ref, skip_compare=None):
        return original(kernels.reconcile_outputs(test, ref, abs_tol, rel_tol, any_text), ref, skip_compare)

    return compare_outputs


#: Test files that read one result made once per session (a fixture behind a file lock) run on one
#: pytest-xdist worker, so that no other worker sits waiting for that lock (pytest_xdist_make_scheduler).
SHARED_SCOPES = {
    "tests/test_grading_kinds.py": "the graded class",
    "tests/test_sandbox.py": "the graded class",
    "tests/test_gradebook.py": "the graded class",
    "tests/test_book.py": "the built book",
    "tests/test_browser.py": "the built book",
    "tests/test_browser_fill.py": "the built book",
    "tests/test_public_book.py": "the built book",
}


def _scope(nodeid: str) -> str:
    """The unit of work of a test on pytest-xdist: its file (a notebook's cells, which share one
    kernel, stay together and in order), or the group of files that share one result."""
    path = nodeid.split("::", 1)[0]
    return SHARED_SCOPES.get(path, path)


def pytest_xdist_make_scheduler(config, log):
    """`make test`'s --dist loadfile, with :data:`SHARED_SCOPES` one unit each."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # pytest-xdist would hand out the files with the most tests first; the order is _schedule's
    config.option.loadscopereorder = False

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return _scope(nodeid)

    return Grouped(config, log)


def unit_weights(bench: dict) -> dict:
    """How long each unit of work takes, from a benchmark result (benchmark.json): the seconds of
    ``make_test.units`` where it has them, else the notebooks' times, with the graded class and the
    built book first."""
    weight = {"the graded class": float("inf"), "the built book": 1e9}  # the two longest, unmeasured
    weight.update({n["notebook"]: float(n["wall_s"] or 0) for n in bench.get("notebooks", [])})
    weight.update({unit: float(s) for unit, s in ((bench.get("make_test") or {}).get("units") or {}).items()})
    return weight


def _schedule(items, bench: dict | None = None) -> None:
    """The longest units of work first (:func:`unit_weights` of the committed benchmark), so that
    none is left for the end; the order within a unit stays."""
    import json
    from pathlib import Path

    if bench is None:
        path = Path(__file__).resolve().parent / "lib" / "bertfamily" / "results" / "benchmark.json"
        try:
            bench = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            bench = {}
    try:
        weight = unit_weights(bench)
    except (KeyError, TypeError, ValueError, AttributeError):  # a benchmark of another shape
        weight = unit_weights({})
    items.sort(key=lambda item: -weight.get(_scope(item.nodeid), 0.0))


#: ``make bench`` sets this to a file: the seconds each unit of work of `make test` took (its tests'
#: setup, call and teardown, summed, as the workers report them) are written there at the end, and
#: recorded in the benchmark, from which :func:`_schedule` orders the next run.
UNIT_TIMES = os.environ.get("BERTFAMILY_UNIT_TIMES")
_unit_seconds: dict = {}
_unit_cpu: dict = {}
_test_cpu: dict = {}  # node id -> CPU seconds of its phases (setup, call, teardown), for the slowest
_counting = [False]  # whether this process adds them up: the controller, which sees every worker's reports
_cpu_mark = [0.0]  # the CPU seconds of this process and its finished children at the last report


_meter: list = [None]  # a worker's own cgroup (benchmarks.commands.CpuMeter), where one can be made


def _cpu_s() -> float:
    """CPU seconds (user + system) of this worker and of every process it started: counted by the worker's
    own cgroup where one can be made (sandboxes and browsers included), else this process and the
    children it has waited for (kernels, builds: their own children included once they end)."""
    import resource

    if _meter[0] is not None and _meter[0].measure == "cgroup":
        return _meter[0].seconds()
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_configure(config):
    _counting[0] = bool(UNIT_TIMES) and not hasattr(config, "workerinput")  # a pytest-xdist worker has it
    if UNIT_TIMES:  # each process that runs tests counts in a subgroup of make test's own group
        from benchmarks.commands import CpuMeter

        _meter[0] = CpuMeter()
        _meter[0].join()


def pytest_collection_finish(session):
    _cpu_mark[0] = _cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``make bench``: each phase's CPU seconds, since the last, in the report (the controller sums them
    by unit of work: a test file's CPU is what its tests and fixtures spent, a session fixture's in the first
    test that asked for it)."""
    outcome = yield
    if UNIT_TIMES:
        now = _cpu_s()
        outcome.get_result().user_properties.append(("cpu_s", now - _cpu_mark[0]))
        _cpu_mark[0] = now


def pytest_runtest_logreport(report):
    if _counting[0]:
        unit = _scope(report.nodeid)
        _unit_seconds[unit] = _unit_seconds.get(unit, 0.0) + float(report.duration or 0.0)
        cpu = dict(report.user_properties).get("cpu_s")
        if cpu is not None:
            _unit_cpu[unit] = _unit_cpu.get(unit, 0.0) + float(cpu)
            _test_cpu[report.nodeid] = _test_cpu.get(report.nodeid, 0.0) + float(cpu)


def pytest_sessionfinish(session, exitstatus):
    if _counting[0] and _unit_seconds:
        import json
        from pathlib import Path

        units = {u: round(s, 1) for u, s in sorted(_unit_seconds.items(), key=lambda kv: -kv[1])}
        Path(UNIT_TIMES).write_text(json.dumps(units, indent=1) + "\n", encoding="utf-8")
        cpu = {u: round(s, 1) for u, s in sorted(_unit_cpu.items(), key=lambda kv: -kv[1])}
        Path(UNIT_TIMES).with_suffix(".cpu.json").write_text(json.dumps(cpu, indent=1) + "\n", encoding="utf-8")
        tests = dict(sorted(((t, round(s, 1)) for t, s in _test_cpu.items()), key=lambda kv: -kv[1])[:40])
        Path(UNIT_TIMES).with_suffix(".tests.json").write_text(json.dumps(tests, indent=1) + "\n", encoding="utf-8")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    _schedule(items)
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT_S
        cell = getattr(item, "cell", None)
        if cell is not None and "measured" in cell.get("metadata", {}):
            tolerance = kernels.tolerance(cell.metadata["measured"])  # a malformed mark fails, in both modes
            if KERNEL_MODE == "tolerant":
                item.compare_outputs = _tolerant(
                    item.compare_outputs, *tolerance, kernels.any_text(cell.metadata["measured"])
                )
        # `make test` runs under pytest-xdist with --dist loadfile (_scope): the cells of one
        # notebook, which share one kernel, stay together and in order on one worker.
