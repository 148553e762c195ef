"""Shared fixtures. Unit tests run offline: nothing here may reach a model hub."""
import os

import pytest

# The course runs offline in CI; make transformers fail fast instead of trying the network.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def offline(monkeypatch):
    """Force the no-hub path, as on a machine with no network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "book: builds the whole website (slow)")
