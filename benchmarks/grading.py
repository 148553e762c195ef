"""Regrading a class of honest submissions: ``bertfamily-grade`` timed, alone and through a Dask cluster."""

from __future__ import annotations

import datetime
import sys
import tempfile
from pathlib import Path

from benchmarks import ROOT
from benchmarks.commands import timed

#: What the course's grader is given, as a lecturer gives it (the grader knows no course folder).
REFERENCE = ROOT / "book" / "exercise_distilbert.ipynb"
SANITIZE = ROOT / "tests" / "sanitize.cfg"


def _honest_class(folder: Path, submissions: int) -> None:
    """``submissions`` honest submissions in ``folder``: the course's own answers, run (the student
    version with the solutions and their outputs put back)."""
    import nbformat

    from bertfamily import grading

    if submissions < 1:
        raise ValueError(f"--add-grading needs at least 1 submission, got {submissions}")
    folder.mkdir()
    answer = grading.model_answer(nbformat.read(REFERENCE, as_version=4))
    for n in range(submissions):
        nbformat.write(answer, folder / f"student{n:02d}_exercise.ipynb")


def _grade_timed(folder: Path, out: Path, submissions: int, jobs: int, scheduler: str | None = None) -> dict:
    """``bertfamily-grade`` on ``folder`` into ``out``, timed; with ``scheduler``, through that Dask cluster."""
    import csv

    where = ["--scheduler", scheduler] if scheduler else []
    result = timed(
        [
            str(Path(sys.executable).with_name("bertfamily-grade")),
            str(folder),
            "--out",
            str(out),
            "--reference",
            str(REFERENCE),
            "--sanitize",
            str(SANITIZE),
            "--jobs",
            str(jobs),
            *where,
        ],
        timeout=7200,
    )
    rows = list(csv.DictReader(out.open(newline="", encoding="utf-8"))) if out.is_file() else []
    full = [r for r in rows if r["score"] == r["max_score"]]
    command = f"bertfamily-grade <{submissions} honest submissions> --jobs {jobs} {' '.join(where)}"
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    result.update(
        command=command.strip(),
        date=now,
        submissions=submissions,
        jobs=jobs,
        full_marks=len(full),
        per_submission_s=round(result["wall_s"] / submissions, 1),
    )
    return result


def grading_time(submissions: int = 30, jobs: int = 2) -> dict:
    """Wall time of ``bertfamily-grade`` on a class of honest submissions, ``jobs`` at a time."""
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        _honest_class(Path(tmp) / "class", submissions)
        return _grade_timed(Path(tmp) / "class", Path(tmp) / "gradebook.csv", submissions, jobs)


def cluster_grading_time(submissions: int = 60, jobs: int = 2, scheduler: str = "local") -> dict:
    """The same class graded with ``--jobs`` here, then through the Dask cluster at ``scheduler``
    (``local``: one started on this machine with ``jobs`` worker processes): the cluster's wall time
    over the local one, the overhead per submission, and whether the two gradebooks are the same bytes."""
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        folder, books = Path(tmp) / "class", (Path(tmp) / "local.csv", Path(tmp) / "cluster.csv")
        _honest_class(folder, submissions)
        local = _grade_timed(folder, books[0], submissions, jobs)
        cluster = _grade_timed(folder, books[1], submissions, jobs, scheduler)
        same = all(b.is_file() for b in books) and books[0].read_bytes() == books[1].read_bytes()
    return {
        "submissions": submissions,
        "jobs": jobs,
        "scheduler": scheduler,
        "local": local,
        "cluster": cluster,
        "ratio": round(cluster["wall_s"] / local["wall_s"], 3),
        "overhead_per_submission_s": round((cluster["wall_s"] - local["wall_s"]) / submissions, 2),
        "same_gradebook": same,
        "status": "ok" if local["status"] == cluster["status"] == "ok" and same else "failed",
    }
