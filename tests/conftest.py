"""Shared fixtures. Unit tests run offline: nothing here may reach a model hub."""

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# The course runs offline in CI; make transformers fail fast instead of trying the network.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
# What the book tests found, printed at the end of the run (build time, screenshots, skip reasons).
BOOK_REPORT = pytest.StashKey[dict]()


@pytest.fixture
def offline(monkeypatch):
    """Force the no-hub path, as on a machine with no network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matrices: one thread is as fast, and immune to other processes sharing the cores.

    A test module turns it on for all its tests with ``pytestmark = pytest.mark.usefixtures("one_thread")``.
    """
    from bertfamily.timing import threads

    with threads(1):
        yield


#: The suite's one tiny size, in the spirit of transformers' ``ModelTester``: every test that needs a
#: small BERT, DistilBERT or ALBERT starts from it (``tiny_config``) and overrides what it tests.
TINY = {"vocab_size": 50, "hidden": 16, "layers": 2, "heads": 2, "intermediate": 32, "positions": 16}


def _tiny_config(kind: str = "bert", **overrides):
    """A tiny transformers config of ``kind`` ("bert", "distilbert" or "albert"); ``overrides`` use the
    config's own field names (``num_hidden_layers=4``, ``n_layers=6``, ...)."""
    import transformers

    t = TINY
    if kind == "distilbert":
        fields = dict(
            vocab_size=t["vocab_size"],
            dim=t["hidden"],
            hidden_dim=t["intermediate"],
            n_layers=t["layers"],
            n_heads=t["heads"],
            max_position_embeddings=t["positions"],
        )
        return transformers.DistilBertConfig(**{**fields, **overrides})
    fields = dict(
        vocab_size=t["vocab_size"],
        hidden_size=t["hidden"],
        intermediate_size=t["intermediate"],
        num_hidden_layers=t["layers"],
        num_attention_heads=t["heads"],
        max_position_embeddings=t["positions"],
    )
    if kind == "albert":
        return transformers.AlbertConfig(**{**fields, "embedding_size": 8, **overrides})
    if kind != "bert":
        raise ValueError(f"tiny_config knows bert, distilbert and albert, got {kind!r}")
    return transformers.BertConfig(**{**fields, **overrides})


@pytest.fixture(scope="session")
def tiny_config():
    """The factory ``tiny_config(kind="bert", **overrides)`` (see ``TINY``)."""
    return _tiny_config


@pytest.fixture(scope="module")
def exercise():
    """The DistilBERT exercise as the grader reads it: its solution notebook and tasks (grading.Exercise)."""
    from bertfamily.grading import Exercise

    return Exercise.load(Path(__file__).resolve().parents[1] / "book" / "exercise_distilbert.ipynb")


@pytest.fixture(scope="session")
def graded_tiny(tmp_path_factory):
    """The class tests/grading_class.py plants, graded once a session (shared by the files that read it)."""
    from grading_class import shared_class

    return shared_class(tmp_path_factory)


#: Fixtures that run real kernels or long trainings: a test that uses one is marked ``slow``, and
#: ``make unit`` (the fast gate) leaves it out; ``make test`` runs everything.
SLOW_FIXTURES = {"planted", "serial", "loop_row", "book_build", "hostile"}


def pytest_configure(config):
    config.addinivalue_line("markers", "book: builds the whole website (slow)")
    config.addinivalue_line("markers", "slow: runs kernels or long trainings (left out by make unit)")
    config.addinivalue_line("markers", "sandbox: runs a kernel in the grader's sandbox (skipped without bubblewrap)")
    config.stash[BOOK_REPORT] = {}


#: Fixtures that grade real submissions: they need the grader's sandbox (bubblewrap).
SANDBOX_FIXTURES = {"planted", "serial", "loop_row", "hostile", "graded_tiny"}


def pytest_collection_modifyitems(config, items):
    from bertfamily.grading.sandbox import sandbox_problem

    problem = sandbox_problem()
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        if problem and (SANDBOX_FIXTURES & fixtures or item.get_closest_marker("sandbox")):
            item.add_marker(pytest.mark.skip(reason=f"the grader's sandbox is missing: {problem}"))


@dataclass
class BookBuild:
    """One strict build of the website: where its HTML is, how the build ended, and its log."""

    html: Path
    returncode: int
    log: str
    seconds: float


@pytest.fixture(scope="session")
def book_report(request) -> dict:
    """Lines for the end-of-run summary: tests put what a person should see here."""
    return request.config.stash[BOOK_REPORT]


@pytest.fixture(scope="session")
def book_build(tmp_path_factory, book_report) -> BookBuild:
    """Build the website once per session, strictly (-W -n, from an empty folder).

    tests/test_book.py asserts that the build succeeded; tests/test_browser.py reads the pages it
    wrote. The build's own doctree cache is deleted afterwards: it is large and nothing reads it.
    """
    out = tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).with_name("jupyter-book")
    start = time.perf_counter()
    result = subprocess.run(
        [str(jb), "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    seconds = time.perf_counter() - start
    shutil.rmtree(out / "_build" / ".doctrees", ignore_errors=True)
    book_report["build"] = f"strict build of the website: {seconds:.1f} s (exit status {result.returncode})"
    return BookBuild(out / "_build" / "html", result.returncode, result.stdout + result.stderr, seconds)


_REPORT_DIR = ROOT / "_build" / "website-report"


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        shutil.rmtree(_REPORT_DIR, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """Under pytest-xdist the summary lines live in the workers: hand them to the controller by file."""
    report = session.config.stash.get(BOOK_REPORT, {})
    if hasattr(session.config, "workerinput") and report:
        _REPORT_DIR.mkdir(parents=True, exist_ok=True)
        worker = session.config.workerinput["workerid"]
        (_REPORT_DIR / f"{worker}.json").write_text(json.dumps(report), encoding="utf-8")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    report = dict(config.stash.get(BOOK_REPORT, {}))
    for path in sorted(_REPORT_DIR.glob("*.json")) if not report else []:
        report.update(json.loads(path.read_text(encoding="utf-8")))
    if report:
        terminalreporter.section("the website")
        for line in report.values():
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def playwright_driver():
    """Playwright's one driver for this process: the browser tests of every file launch their Chromium
    from it (a second `sync_playwright()` while the first is open fails: "Sync API inside the asyncio
    loop", as it did when two browser test files shared a pytest-xdist worker)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver
