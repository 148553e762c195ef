"""Grading on a Dask cluster (bertfamily.grading.cluster: ``bertfamily-grade ... --scheduler``).

One LocalCluster on loopback serves the module: two worker processes (with their nannies, which
restart a killed worker), one thread each. Most tests grade with a cheap stand-in for
``grade_submission`` (pickled by value, so the workers need not import this file) that reads what
to do from the submission: its row depends only on the bytes, and it can kill its worker. The last
test grades real notebooks of the small exercise made for the tests end to end, a worker killed on
the way, against a local run.
"""

import contextlib
import csv
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import cloudpickle
import nbformat
import pytest

from bertfamily import grading
from bertfamily.grading import cluster, fingerprints, sandbox
from bertfamily.grading.classroom import collect
from bertfamily.grading.gradebook import write_feedback, write_gradebook
from bertfamily.grading.pipeline import Row

cloudpickle.register_pickle_by_value(sys.modules[__name__])
ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "grading_tiny.ipynb"  # the small exercise made for the tests
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"


def cheap_row(data: bytes, display: str, exercise) -> Row:
    """What the stand-in grades: marks from the bytes, one mistake said, as a real row has them."""
    names = [t.name for t in exercise.graded]
    marks = {n: (len(data) + i) % 2 for i, n in enumerate(names)}
    return Row(
        display,
        "graded",
        sum(marks.values()),
        len(names),
        marks,
        f"{len(data)} bytes",
        "reproduced",
        feedback={names[0]: [f"✗ {len(data)} is not the answer (hint: count again)"]},
    )


def cheap(path, display, exercise, limits, sanitize, strict_outputs=False):
    """The stand-in for grade_submission: logs who graded what, kills its worker when told to."""
    data = Path(path).read_bytes()
    spec = json.loads(data)
    with open(spec["log"], "a", encoding="utf-8") as log:
        log.write(f"{Path(display).name} {os.getpid()}\n")
    kill = spec.get("kill")
    if kill == "always" or (kill == "once" and not os.path.exists(spec["marker"])):
        if kill == "once":
            Path(spec["marker"]).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(spec.get("sleep", 0))
    return cheap_row(data, display, exercise)


def cheap_class(folder: Path, n: int, **special) -> tuple[Path, Path]:
    """``n`` stand-in submissions s0 ... s{n-1}; ``special`` maps a name to extra instructions."""
    folder.mkdir()
    log = folder.parent / f"{folder.name}.log"
    for i in range(n):
        spec = {"log": str(log), "sleep": 0.3, "padding": "x" * i, **special.get(f"s{i}", {})}
        (folder / f"s{i}.ipynb").write_text(json.dumps(spec), encoding="utf-8")
    return folder, log


def _idle(client, timeout: float = 60) -> None:
    """Wait until no worker of ``client``'s cluster runs a task (one the scheduler cancelled runs on)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(client.run(lambda dask_worker: dask_worker.state.executing_count).values()) and not any(
            client.processing().values()
        ):
            return
        time.sleep(0.1)


def graded(log: Path) -> list[tuple[str, int]]:
    return [(name, int(pid)) for name, pid in (line.split() for line in log.read_text().splitlines())]


def gradebook_bytes(rows, exercise, folder: Path) -> dict:
    """The gradebook and the feedback files the rows give, as bytes by name."""
    folder.mkdir()
    write_gradebook(rows, exercise, folder / "gradebook.csv")
    write_feedback(rows, exercise, folder / "feedback")
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def dask_cluster():
    with two_workers() as found:
        yield found


@contextlib.contextmanager
def two_workers():
    """A local Dask cluster of two worker processes (each with a nanny): (its address, a client)."""
    import logging

    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            memory_limit=0,
            silence_logs=logging.CRITICAL,
        ) as local,
        Client(local, set_as_default=False) as client,
    ):
        client.wait_for_workers(2, timeout=120)
        yield local.scheduler_address, client


@pytest.fixture
def client(dask_cluster):
    """The module's client, once both workers run (a killed one is restarted by its nanny)."""
    address, client = dask_cluster
    client.wait_for_workers(2, timeout=60)
    return client


def grade(folder, exercise, address, out, **kwargs):
    executor = cluster.DaskCluster(address, out=out, grader=cheap, **kwargs)
    return grading.grade_class([folder], exercise, grading.Limits(), progress=False, executor=executor)


# ------------------------------------------------------------------ without a cluster


def test_a_worker_that_differs_is_named_and_grades_nothing(exercise, tmp_path):
    """The check a task makes before it grades: what differs is said, key by key."""
    mine = cluster.fingerprint()
    assert {"Python", "bertfamily version", "bertfamily files (SHA-256 of all)", "torch version"} <= set(mine)
    theirs = {**mine, "bertfamily version": "0.0.9", "torch version": "not installed"}
    assert fingerprints.differences(mine, theirs) == [
        f"bertfamily version: 0.0.9 on the worker, {mine['bertfamily version']} here",
        f"torch version: not installed on the worker, {mine['torch version']} here",
    ]
    (folder, log) = cheap_class(tmp_path / "one", 1)
    data = (folder / "s0.ipynb").read_bytes()
    with pytest.raises(cluster.WorkerMismatch, match="bertfamily version: 0.1.0 on the worker, 9.9 here"):
        cluster.grade_bytes(
            data, "s0.ipynb", exercise, grading.Limits(), "", False, {**mine, "bertfamily version": "9.9"}, grader=cheap
        )
    assert not log.exists()  # nothing was graded
    row = cluster.grade_bytes(data, "s0.ipynb", exercise, grading.Limits(), "", False, mine, grader=cheap)
    assert row == cheap_row(data, "s0.ipynb", exercise)


def test_the_copies_of_killed_workers_are_removed_by_the_next_task(exercise, tmp_path, monkeypatch):
    """A worker killed mid-task (by the OOM killer, or by test_killed_workers_lose_nothing) cannot remove
    its private copy of the submission: the next task on the machine does, and leaves a live one's."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{sandbox.COPY_PREFIX}{2**22 + 4321}-x"  # above Linux's largest process id
    live = tmp_path / f"{sandbox.COPY_PREFIX}{os.getpid()}-y"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "s0.ipynb").write_text("a student's notebook", encoding="utf-8")
        (folder / "s0.ipynb").chmod(0o400)
    (folder, _) = cheap_class(tmp_path / "one", 1)
    data = (folder / "s0.ipynb").read_bytes()
    mine = cluster.fingerprint()
    row = cluster.grade_bytes(data, "s0.ipynb", exercise, grading.Limits(), "", False, mine, grader=cheap)
    assert row == cheap_row(data, "s0.ipynb", exercise)
    assert not dead.exists() and (live / "s0.ipynb").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(sandbox.COPY_PREFIX)) == [live.name]


def test_the_journal_keeps_rows_and_refuses_other_settings(exercise, tmp_path):
    settings = cluster.run_settings(exercise, grading.Limits(), "sanitize", False, cluster.fingerprint())
    path = tmp_path / "g.csv.journal"
    journal = cluster.Journal.open(path, settings, resume=False, force=False)
    rows = [cheap_row(bytes(n), f"s{n}.ipynb", exercise) for n in range(3)]
    for n, row in enumerate(rows):
        journal.add(f"digest{n}", row)
    journal.close()
    with open(path, "a") as f:
        f.write('{"submission": "s9.ipynb", "sha2')  # a line cut short by a crash
    kept = cluster.Journal.open(path, settings, resume=True, force=False)
    kept.close()
    assert len(path.read_text().splitlines()) == 4  # the settings and the three rows, the cut line gone
    assert kept.rows == {(r.submission, f"digest{n}"): r for n, r in enumerate(rows)}
    assert [r.feedback for r in kept.rows.values()] == [r.feedback for r in rows]
    with pytest.raises(ValueError, match="rows of an earlier run that did not finish: pass --resume"):
        cluster.Journal.open(path, settings, resume=False, force=False)
    other = cluster.run_settings(exercise, grading.Limits(timeout=5), "sanitize", True, cluster.fingerprint())
    with pytest.raises(ValueError, match=r"other settings \(limits, strict_outputs differ\)"):
        cluster.Journal.open(path, other, resume=True, force=False)
    cluster.Journal.open(path, other, resume=False, force=True).close()
    assert len(path.read_text().splitlines()) == 1  # started over: the settings line only


# ------------------------------------------------------------------ on a loopback cluster


def test_killed_workers_lose_nothing(exercise, tmp_path):
    """s0 kills its worker once (then grades), s5 on every try: s0's row is as if nothing happened,
    s5 gets an error row after two workers died, not a third try, and every other row is there.
    (s0 first and s5 last: the other worker grades while the first is restarted.) On a cluster of its
    own: a nanny that has restarted its worker three times is not the other tests' concern (in one
    whole run, the module's cluster had one worker left for 60 s after this test)."""
    folder, log = cheap_class(
        tmp_path / "class", 6, s0={"kill": "once", "marker": str(tmp_path / "s0.killed")}, s5={"kill": "always"}
    )
    out = tmp_path / "gradebook.csv"
    with two_workers() as (address, _):
        rows = grade(folder, exercise, address, out)
    expected = [cheap_row(p.read_bytes(), d, exercise) for p, d in collect([folder])]
    assert [r.submission for r in rows] == [r.submission for r in expected]
    for row, want in zip(rows, expected, strict=True):
        if row.submission.endswith("s5.ipynb"):  # the one shape of a run that never ended: no score, no marks
            assert (row.status, row.score, set(row.tasks.values())) == ("error", None, {None})
            assert "error: the grading worker died while running it, 2 times" in row.detail
        else:
            assert (row, row.feedback) == (want, want.feedback)
    tries = [name for name, _ in graded(log)]
    assert tries.count("s5.ipynb") == 2 and tries.count("s0.ipynb") == 2
    assert set(tries) == {f"s{i}.ipynb" for i in range(6)}
    journal = cluster.journal_path(out).read_text().splitlines()
    assert sorted(json.loads(line)["submission"] for line in journal[1:]) == [r.submission for r in rows]


def test_a_mismatched_worker_is_refused_before_it_grades(exercise, client, dask_cluster, tmp_path, capsys):
    def stale():
        cluster.fingerprint()
        fingerprints._FINGERPRINT["bertfamily version"] = "0.0.1"
        return os.getpid()

    def fresh():
        fingerprints._FINGERPRINT.clear()

    first = sorted(client.scheduler_info(n_workers=-1)["workers"])[0]
    (pid,) = client.run(stale, workers=[first]).values()
    try:
        folder, log = cheap_class(tmp_path / "class", 4)
        rows = grade(folder, exercise, dask_cluster[0], tmp_path / "gradebook.csv")
    finally:
        client.run(fresh, workers=[first])
    err = capsys.readouterr().err
    assert f"refused worker {first} (it grades nothing): bertfamily version: 0.0.1 on the worker, 0.1.0 here" in err
    assert rows == [cheap_row(p.read_bytes(), d, exercise) for p, d in collect([folder])]
    assert pid not in {p for _, p in graded(log)} and len(graded(log)) == 4


def test_a_cluster_of_mismatched_workers_grades_nothing(exercise, client, dask_cluster, tmp_path):
    def stale():
        cluster.fingerprint()
        fingerprints._FINGERPRINT["torch version"] = "1.0"

    def fresh():
        fingerprints._FINGERPRINT.clear()

    client.run(stale)
    try:
        folder, log = cheap_class(tmp_path / "class", 2)
        with pytest.raises(
            cluster.Interrupted,
            match=r"every worker of the cluster was refused for 1 s:\n  tcp://"
            r".*: torch version: 1.0 on the worker, .* here\n  tcp://.*: "
            r"0 of 2 submissions graded",
        ):
            grade(folder, exercise, dask_cluster[0], tmp_path / "gradebook.csv", patience=1)
    finally:
        client.run(fresh)
    assert not log.exists()


def test_an_interrupted_run_says_what_was_graded_and_resumes(exercise, client, dask_cluster, tmp_path, monkeypatch):
    folder, log = cheap_class(tmp_path / "class", 5)
    out = tmp_path / "gradebook.csv"
    add = cluster.Journal.add

    def interrupt_after_two(self, digest, row):
        if len(self.rows) == 2:
            raise KeyboardInterrupt
        add(self, digest, row)

    with monkeypatch.context() as m:
        m.setattr(cluster.Journal, "add", interrupt_after_two)
        with pytest.raises(cluster.Interrupted) as stopped:
            grade(folder, exercise, dask_cluster[0], out)
    message = str(stopped.value)
    assert message.startswith("interrupted (Ctrl-C): 2 of 5 submissions graded (")
    assert f"kept in {cluster.journal_path(out)}; no gradebook written" in message and "--resume" in message
    kept = {
        Path(json.loads(line)["submission"]).name for line in cluster.journal_path(out).read_text().splitlines()[1:]
    }
    assert len(kept) == 2 and all(name in message for name in kept)
    with pytest.raises(ValueError, match="--resume"):
        grade(folder, exercise, dask_cluster[0], out)
    _idle(client)  # a task of the interrupted run may still be starting, and logging: wait for the workers first
    log.write_text("")
    rows = grade(folder, exercise, dask_cluster[0], out, resume=True)
    assert rows == [cheap_row(p.read_bytes(), d, exercise) for p, d in collect([folder])]
    assert sorted(name for name, _ in graded(log)) == sorted({f"s{i}.ipynb" for i in range(5)} - kept)


def test_a_scheduler_gone_stops_the_run_and_says_so(exercise, tmp_path):
    """The scheduler closes after two rows: what was graded is said and kept for --resume."""
    import logging
    import threading

    import dask
    from distributed import LocalCluster

    folder, _ = cheap_class(tmp_path / "class", 5)
    out = tmp_path / "gradebook.csv"
    with (
        dask.config.set({"distributed.comm.timeouts.connect": "2s"}),
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.CRITICAL,
        ) as local,
        pytest.MonkeyPatch.context() as m,
    ):
        add = cluster.Journal.add

        def close_after_two(self, digest, row):
            add(self, digest, row)
            if len(self.rows) == 2:
                threading.Thread(target=local.close).start()  # the scheduler and its worker, gone

        m.setattr(cluster.Journal, "add", close_after_two)
        with pytest.raises(
            cluster.Interrupted,
            match=f"lost the scheduler at {local.scheduler_address} .*: "
            r"2 of 5 submissions graded \(.*s0.ipynb, .*s1.ipynb\)",
        ):
            grade(folder, exercise, local.scheduler_address, out)
    assert not out.exists() and len(cluster.journal_path(out).read_text().splitlines()) == 3


def test_the_command_line_grades_on_the_cluster(exercise, client, dask_cluster, tmp_path, capsys):
    """Without a kernel (files that are not notebooks): the gradebook, the journal, the messages."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "empty.ipynb").write_bytes(b"")
    (folder / "cut.ipynb").write_text('{"cells": [', encoding="utf-8")
    (folder / "link.ipynb").symlink_to(folder / "cut.ipynb")
    out, local = tmp_path / "gradebook.csv", tmp_path / "local.csv"
    assert (
        grading.main(
            [
                str(folder),
                "--out",
                str(out),
                "--reference",
                str(EXERCISE),
                "--scheduler",
                dask_cluster[0],
                "--feedback",
                str(tmp_path / "feedback"),
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "3 submissions: 3 invalid" in captured.out and "3/3" in captured.err
    assert "the scheduler has no dashboard" in captured.err or "Dask dashboard: http" in captured.err
    assert grading.main([str(folder), "--out", str(local), "--reference", str(EXERCISE), "--jobs", "1"]) == 0
    assert out.read_bytes() == local.read_bytes()
    assert len(list(csv.reader(out.open()))) == 4 and "symbolic link" in out.read_text()
    assert cluster.journal_path(out).is_file()
    assert cluster.journal_path(local).is_file()  # a local run keeps its journal too, and resumes from it
    assert (
        grading.main(
            [str(folder), "--out", str(local), "--reference", str(EXERCISE), "--jobs", "1", "--resume", "--force"]
        )
        == 0
    )
    assert "resuming: 3 of 3 submissions already graded" in capsys.readouterr().err
    assert out.read_bytes() == local.read_bytes()


def kill_empty_once(path, display, exercise, limits, sanitize, strict_outputs=False):
    """grade_submission, but the first worker to get ``empty.ipynb`` dies (a marker beside the class folder)."""
    marker = Path(display).parent.parent / "empty.killed"
    if display.endswith("empty.ipynb") and not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return grading.grade_submission(path, display, exercise, limits, sanitize, strict_outputs)


@pytest.mark.slow
def test_real_notebooks_give_the_local_gradebook_byte_for_byte(client, dask_cluster, tmp_path, monkeypatch):
    """An honest submission, one with no answers (the student version: every check fails) and an empty
    file of the small exercise made for the tests, graded locally (in this process: the pool of two jobs is the
    graded class's) and on the cluster, where
    the worker that takes the empty file dies first: the same gradebook and feedback."""
    tiny = grading.Exercise.load(TINY)
    folder = tmp_path / "class"
    folder.mkdir()
    nbformat.write(grading.model_answer(tiny.reference), folder / "correct.ipynb")
    nbformat.write(grading.student_version(tiny.reference), folder / "wrong.ipynb")
    (folder / "empty.ipynb").write_bytes(b"")
    limits = grading.Limits(cell_timeout=120, timeout=300, memory_mib=1024, disk_mib=64)
    local = grading.grade_class([folder], tiny, limits, jobs=1, progress=False)
    executor = cluster.DaskCluster(dask_cluster[0], out=tmp_path / "g.csv", grader=kill_empty_once)
    rows = grading.grade_class([folder], tiny, limits, progress=False, executor=executor)
    assert (tmp_path / "empty.killed").exists()  # a worker died
    assert [r.status for r in rows] == ["graded", "invalid", "graded"]
    assert rows[0].score == rows[0].max_score and rows[2].score == 0
    assert gradebook_bytes(rows, tiny, tmp_path / "cluster") == gradebook_bytes(local, tiny, tmp_path / "local")
