"""Root pytest configuration: applies to the unit tests and to the notebooks nbval collects."""

# nbval waits only 5 s for a cell's output messages after the cell has finished; a kernel that is
# still flushing many progress-bar updates on a busy 2-core machine can take longer than that.
NBVAL_OUTPUT_TIMEOUT_S = 60


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT_S
        # `make test` runs under pytest-xdist with --dist loadfile: the cells of one notebook, which
        # share one kernel, stay together and in order on one worker.
