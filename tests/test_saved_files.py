"""The self-check asks what the grader asks of a measured size (issue: the student's ✓ is the grade): the size of
a file the notebook saved and kept. A lecturer's trial found honest students with ✓ on every task losing four
points for sizes measured in memory (``io.BytesIO``) or of a temporary file deleted by its ``with`` block; now
their own check says so, in the grader's words, before they hand in."""

import io
import os
import tempfile

import pytest
import torch

from bertfamily import answers, checks
from bertfamily.answers import files_checked_elsewhere, saved_file


@pytest.fixture(autouse=True)
def _places_of_our_own(tmp_path, monkeypatch):
    """The places the look reads (temporary, working, home folders) are this test's: a file of the same size
    elsewhere on the machine cannot answer for it."""
    for name in ("tmp", "work", "home"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def sizes(model):
    """(file, in memory) bytes of ``torch.save(model.state_dict())``, the file kept in a temporary folder."""
    folder = tempfile.mkdtemp(prefix="saved-files-test-")
    path = os.path.join(folder, "model.pt")
    torch.save(model.state_dict(), path)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return os.path.getsize(path), buffer.getbuffer().nbytes, path


def test_a_kept_file_is_found_and_a_size_measured_in_memory_is_not():
    kept, in_memory, path = sizes(torch.nn.Linear(31, 7))
    assert saved_file(kept) == path
    os.remove(path)
    assert saved_file(kept) is None  # deleted since: not a measurement
    with tempfile.TemporaryDirectory() as folder:
        sparse = os.path.join(folder, "sparse.pt")
        with open(sparse, "wb") as handle:
            handle.truncate(10_000_019)
        assert saved_file(10_000_019) is None  # its bytes were never written


def test_a_check_fails_a_size_of_no_saved_file_and_says_what_counts(capsys):
    assert not checks.check_embedding_quantization(98_765_431)
    out = capsys.readouterr().out
    assert out.startswith("✗") and "not the size of a file your notebook saved" in out and "io.BytesIO" in out, out
    with files_checked_elsewhere():  # the grader's process: the run's files are checked by the grader itself
        checks.check_embedding_quantization(98_765_431)
    assert "saved" not in capsys.readouterr().out


def test_a_size_that_is_a_kept_files_goes_on_to_the_check(capsys, tmp_path):
    (tmp_path / "work" / "model.pt").write_bytes(os.urandom(123_457))
    assert not checks.check_embedding_quantization(123_457)  # a real file, the wrong size: the check's own verdict
    out = capsys.readouterr().out
    assert "not the size of a file" not in out and out.startswith("✗"), out


@pytest.mark.parametrize("value", [None, "12", True, -5])
def test_an_answer_that_is_no_size_gets_the_checks_own_hint(capsys, value):
    checks.check_embedding_quantization(value)
    assert "not the size of a file" not in capsys.readouterr().out


def test_the_look_is_bounded(tmp_path, monkeypatch):
    """A home of many files is not read whole: the look stops at LOOK_ENTRIES entries a place."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))  # the three places are one: tmp_path
    for i in range(30):
        (tmp_path / f"a{i:02d}").write_bytes(b"x" * (i + 1))
    assert all(saved_file(n) for n in range(1, 31))
    monkeypatch.setattr(answers, "LOOK_ENTRIES", 10)
    assert sum(saved_file(n) is not None for n in range(1, 31)) == 10


def test_the_notebooks_workdir_is_read_first(tmp_path, monkeypatch):
    """A /tmp crowded past LOOK_ENTRIES (a virtual environment in it) does not hide the exercise's workdir,
    read first where the notebook defines it, then level by level."""
    import __main__

    crowd = tmp_path / "tmp" / "venv"
    crowd.mkdir()
    for i in range(50):
        (crowd / f"f{i}").write_bytes(b"y")
    workdir = tmp_path / "elsewhere" / "distilbert-exercise-x"
    workdir.mkdir(parents=True)
    (workdir / "fp32.pt").write_bytes(os.urandom(7_777))
    monkeypatch.setattr(answers, "LOOK_ENTRIES", 20)
    assert saved_file(7_777) is None  # not in the three places within 20 entries each
    monkeypatch.setattr(__main__, "workdir", str(workdir), raising=False)
    assert saved_file(7_777) == str(workdir / "fp32.pt")
