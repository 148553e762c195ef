"""Root pytest configuration: applies to the unit tests and to the notebooks nbval collects."""
import os
import sys

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


def _tolerant(original, abs_tol, rel_tol):
    """nbval's comparison, after numbers within the cell's stated tolerance are taken as equal."""
    def compare_outputs(test, ref, skip_compare=None):
        return original(kernels.reconcile_outputs(test, ref, abs_tol, rel_tol), ref, skip_compare)
    return compare_outputs


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT_S
        cell = getattr(item, "cell", None)
        if cell is not None and "measured" in cell.get("metadata", {}):
            tolerance = kernels.tolerance(cell.metadata["measured"])  # a malformed mark fails, in both modes
            if KERNEL_MODE == "tolerant":
                item.compare_outputs = _tolerant(item.compare_outputs, *tolerance)
        # `make test` runs under pytest-xdist with --dist loadfile: the cells of one notebook, which
        # share one kernel, stay together and in order on one worker.
