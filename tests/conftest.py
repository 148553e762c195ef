"""Shared fixtures. Unit tests run offline: nothing here may reach a model hub."""
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


def pytest_configure(config):
    config.addinivalue_line("markers", "book: builds the whole website (slow)")
    config.stash[BOOK_REPORT] = {}


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
    result = subprocess.run([str(jb), "build", str(ROOT), "--path-output", str(out), "-W", "-n",
                             "--keep-going"], capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - start
    shutil.rmtree(out / "_build" / ".doctrees", ignore_errors=True)
    book_report["build"] = f"strict build of the website: {seconds:.1f} s (exit status {result.returncode})"
    return BookBuild(out / "_build" / "html", result.returncode, result.stdout + result.stderr, seconds)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    report = config.stash.get(BOOK_REPORT, {})
    if report:
        terminalreporter.section("the website")
        for line in report.values():
            terminalreporter.write_line(line)
