"""How `make test` hands its work to pytest-xdist's workers (the root conftest.py): whole units, the
longest first, by the times the committed benchmark measured."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
# the root conftest.py, under a name of its own (pytest has already imported tests/conftest.py as "conftest")
_spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root)


def items(*nodeids):
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_units_group_files_that_share_one_result():
    assert (
        root._scope("tests/test_sandbox.py::test_x") == root._scope("tests/test_gradebook.py::t") == "the graded class"
    )
    assert root._scope("book/01_dynamic_masking.ipynb::Cell 3") == "book/01_dynamic_masking.ipynb"


def test_the_longest_units_go_first_and_a_units_order_stays():
    bench = {
        "notebooks": [{"notebook": "book/a.ipynb", "wall_s": 40.0}, {"notebook": "book/b.ipynb", "wall_s": 5}],
        "make_test": {"units": {"tests/test_slow.py": 90.0, "book/b.ipynb": 60.0, "tests/test_fast.py": 1.0}},
    }
    work = items(
        "tests/test_fast.py::t1",
        "book/a.ipynb::Cell 0",
        "tests/test_slow.py::t1",
        "book/b.ipynb::Cell 0",
        "tests/test_slow.py::t2",
        "book/a.ipynb::Cell 1",
        "tests/test_gradebook.py::t",
        "tests/new.py::t",
    )
    root._schedule(work, bench)
    assert [w.nodeid for w in work] == [
        "tests/test_gradebook.py::t",  # the graded class: unmeasured, first
        "tests/test_slow.py::t1",
        "tests/test_slow.py::t2",  # 90 s, measured
        "book/b.ipynb::Cell 0",  # 60 s measured in make test (5 s alone)
        "book/a.ipynb::Cell 0",
        "book/a.ipynb::Cell 1",  # 40 s, the notebook's own time
        "tests/test_fast.py::t1",
        "tests/new.py::t",
    ]  # 1 s; a file never measured: last


def test_a_benchmark_of_another_shape_leaves_the_default_order():
    work = items("tests/b.py::t", "tests/test_browser.py::t", "tests/a.py::t")
    root._schedule(work, {"notebooks": "not a list"})
    assert [w.nodeid for w in work] == ["tests/test_browser.py::t", "tests/b.py::t", "tests/a.py::t"]


def test_xdist_keeps_the_order_instead_of_counting_tests():
    """pytest-xdist's loadscope hands out the files with the most tests first unless told not to."""
    values = {"dist": "loadfile", "tx": ["3*popen"], "numprocesses": 3}
    config = SimpleNamespace(
        getvalue=values.get, option=SimpleNamespace(loadscopereorder=True, numprocesses=3, tx=[], dist="loadfile")
    )
    scheduler = root.pytest_xdist_make_scheduler(config, None)
    assert config.option.loadscopereorder is False
    assert scheduler._split_scope("tests/test_browser.py::t") == "the built book"
    values["dist"] = "load"
    assert root.pytest_xdist_make_scheduler(config, None) is None
