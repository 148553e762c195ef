"""Regrading a class: every submission graded in its own run, into a gradebook, feedback and an LMS export.

Each submission is read (a readable notebook? this exercise?), repaired into the copy that runs,
run under nbval in a sandbox, and scored task by task; the submitted file is only ever read.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bertfamily.grading.exercise import ROOT, Exercise, Invalid, prepare, read_submission
from bertfamily.grading.sandbox import Limits, SandboxMissing, run_sandboxed
from bertfamily.grading.scoring import REPRODUCED, score_run
from bertfamily.grading.verify import exports

#: The nbval sanitizers that ``make test`` uses.
SANITIZE = ROOT / "tests" / "sanitize.cfg"
STATUSES = ("graded", "invalid", "timeout", "error", "missing")
#: Where a model came from is not compared: a student online saw "loaded ... from the Hugging Face
#: hub", the grader (offline) prints "no model hub here: built ..." (bertfamily.models.load_pretrained).
#: The exercise's own line (bertfamily.models.exercise_source) says the same for the transformers code
#: students write.
MODEL_SOURCE = (r"(loaded \S+ from the Hugging Face hub \(pretrained weights\)|the Hugging Face hub is "
                r"reachable: [^\n]*|(the hub was reachable but the download failed \(\w+\); )?no model hub "
                r"here: [^\n]*)", "MODEL SOURCE")
#: What one grading job needs: the kernel of the exercise with BERT-base and DistilBERT, and nbval.
JOB_MIB = 1843


@dataclass
class Row:
    """One line of the gradebook."""
    submission: str
    status: str
    score: int | None
    max_score: int
    tasks: dict
    detail: str
    outputs: str = ""      # whether the stored outputs reproduced, per task where they did not
    flags: str = ""        # what the instructor should look at: forged or typed answers, tampering code
    student: str = ""      # the roster's id, with --roster
    read_by_hand: str = ""  # free-text answers for the instructor (never scored)
    feedback: dict = field(default_factory=dict, compare=False)  # task -> ✗ lines and hints


def _sanitizers(path=SANITIZE) -> str:
    """The nbval sanitize file of a run: the grader's own pattern first, then the course's."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no nbval sanitize file at {path}: pass --sanitize FILE")
    regex, replace = MODEL_SOURCE
    return f"[grading-model-source]\nregex: {regex}\nreplace: {replace}\n\n" + path.read_text(encoding="utf-8")


def _outputs_text(outputs: dict) -> str:
    if not outputs:
        return ""
    if all(v == REPRODUCED for v in outputs.values()):
        return REPRODUCED
    return "; ".join(f"{task}: {v}" for task, v in outputs.items() if v != REPRODUCED)


def grade_submission(path, display: str, exercise: Exercise, limits: Limits, sanitize: str,
                     strict_outputs: bool = False) -> Row:
    """Grade one submitted file (only read, never written): its gradebook row."""
    empty = dict.fromkeys((t.name for t in exercise.graded), None)
    max_score = len(exercise.graded)
    try:
        link = _link(path)
        if link:
            raise Invalid(link)
        data = Path(path).read_bytes()
        nb = read_submission(data, exercise.tasks, exercise.name)
    except (Invalid, OSError) as exc:
        reason = str(exc) if isinstance(exc, Invalid) else f"cannot read the file ({exc.strerror})"
        return Row(display, "invalid", None, max_score, empty, reason)
    try:
        prepared = prepare(nb, exercise)
        run = run_sandboxed(prepared.nb, limits, sanitize, exports(exercise), data, Path(path).name)
        s = score_run(prepared, exercise, run, limits, strict_outputs)
    except SandboxMissing:
        raise
    except Exception as exc:  # one submission never stops the class: its row says what went wrong
        why = f"{type(exc).__name__}: {exc}".strip()[:200]
        return Row(display, "error", None, max_score, empty, f"error: the grader failed on this submission ({why})",
                   flags=f"read by hand: the grader failed on it ({type(exc).__name__})")
    return Row(display, s.status, sum(s.marks.values()), max_score, s.marks, "; ".join(s.problems + s.notes),
               _outputs_text(s.outputs), "; ".join(s.flags), feedback=s.feedback,
               read_by_hand="; ".join(s.read_by_hand))


def _link(path) -> str | None:
    """Why a path is not graded when it is a symbolic link, or lies in a linked folder (None: it is not)."""
    path = Path(path)
    for part in [path, *path.parents]:
        if part.is_symlink():
            target = os.readlink(part)
            where = "it is" if part == path else f"its folder {part} is"
            return (f"not graded: {where} a symbolic link (to {target}); hand in the notebook itself "
                    "(a link can point at the reference solution or at a classmate's file)")
    return None


def collect(paths) -> list[tuple[Path, str]]:
    """The files to grade, as (path, name in the gradebook): each file given, and every ``*.ipynb``
    under each folder given (``.ipynb_checkpoints`` left out), once each, sorted by name."""
    found = {}
    for given in paths:
        path = Path(given)
        if path.is_dir() and not path.is_symlink():
            members = [p for p in _notebooks(path) if ".ipynb_checkpoints" not in p.parts]
            if not members:
                raise ValueError(f"nothing to grade in {given}: the folder holds no .ipynb file")
        elif path.is_file() or path.is_symlink():
            members = [path]
        elif path.exists():
            raise ValueError(f"{given} is neither a file nor a folder")
        else:
            raise ValueError(f"no such file or folder: {given}")
        for member in members:  # by the path given, not the file it leads to: two links are two rows
            found.setdefault(os.path.abspath(member), (member, str(member)))
    if not found:
        raise ValueError("nothing to grade: give notebooks or folders of notebooks")
    return sorted(found.values(), key=lambda item: item[1])


def _notebooks(folder: Path) -> list[Path]:
    """Every ``*.ipynb`` under ``folder``, links included (graded as refused), linked folders not entered."""
    found = []
    for top, dirs, files in os.walk(folder):
        found += [Path(top) / f for f in files if f.endswith(".ipynb")]
        found += [Path(top) / d for d in dirs if d.endswith(".ipynb") and os.path.islink(os.path.join(top, d))]
    return found


def _grade_one(args) -> Row:
    return grade_submission(*args)


def _pool(work, jobs, rows, bar) -> list:
    """Grade ``work`` in a pool of ``jobs`` processes, appending the rows; return the work whose worker
    died (a broken pool loses every submission that had not finished)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    from .sandbox import die_with_parent

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=die_with_parent) as pool:
        futures, taken = {pool.submit(_grade_one, args): args for args in work}, set()
        try:
            for future in as_completed(futures):
                rows.append(future.result())
                taken.add(future)
                bar.update()
            return []
        except BrokenProcessPool:
            done = {f for f in futures if f.done() and not f.cancelled() and f.exception() is None}
            for future in done - taken:
                rows.append(future.result())
                bar.update()
            return [args for f, args in futures.items() if f not in done]


def _worker_died(args) -> Row:
    _, name, exercise, *_ = args
    return Row(name, "error", None, len(exercise.graded), dict.fromkeys(t.name for t in exercise.graded),
               "error: the grading worker died while this submission ran, twice (the other submissions "
               "were graded)")


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _jobs_default() -> int:
    """One job per core, but no more than the free memory holds (about 1.8 GiB each)."""
    import psutil
    return max(1, min(_cores(), int(psutil.virtual_memory().available / 2 ** 20 // JOB_MIB)))


def grade_class(paths, exercise: Exercise | None = None, limits: Limits = Limits(), jobs: int = 1,
                sanitize=SANITIZE, progress: bool = True, strict_outputs: bool = False) -> list[Row]:
    """Grade every submission under ``paths`` (see :func:`collect`), ``jobs`` at a time; rows sorted
    by submission, so the gradebook does not depend on the order given or on ``jobs``."""
    import importlib.util

    from tqdm.auto import tqdm

    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    missing = [m for m in ("pytest", "nbval", "psutil") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"the grader needs {', '.join(missing)}: install the test extras "
                         "(pip install -e '.[test]', as make setup does)")
    exercise = exercise or Exercise.load()
    sanitizers = _sanitizers(sanitize)
    found = collect(paths)
    if limits.threads is None:  # share the cores between the kernels that run at once
        limits = dataclasses.replace(limits, threads=max(1, _cores() // max(1, min(jobs, len(found)))))
    work = [(path, name, exercise, limits, sanitizers, strict_outputs) for path, name in found]
    rows = []
    with tqdm(total=len(work), desc="grading", unit="notebook", disable=not progress, file=sys.stderr) as bar:
        if jobs == 1:
            for args in work:
                rows.append(_grade_one(args))
                bar.update()
        else:
            lost = _pool(work, min(jobs, len(work)), rows, bar)
            for args in lost:  # a worker died under them: each alone, in a worker of its own
                if _pool([args], 1, rows, bar):
                    rows.append(_worker_died(args))
                    bar.update()
    return sorted(rows, key=lambda r: r.submission)


# --------------------------------------------------------------------------- a roster

#: Default --pattern: the student id is the file name up to its first "_", "-", "." or space
#: (alice.ipynb, alice_exercise.ipynb, 12345-distilbert.ipynb).
ID_PATTERN = r"^(?P<id>[^_\-. ]+)"
ROSTER_FIELDS = ("id", "name", "canvas_id", "sis_user_id", "sis_login_id", "section")


def read_roster(path) -> dict:
    """The students of a roster CSV, by id. Its header needs ``id``; it may have ``name`` and Canvas's
    ``canvas_id``, ``sis_user_id``, ``sis_login_id`` and ``section``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no roster at {path}")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip().lower() for h in reader.fieldnames or []]
        if "id" not in header:
            raise ValueError(f"the roster {path} needs an 'id' column (it has: {', '.join(header) or 'no header'}); "
                             f"it may also have {', '.join(ROSTER_FIELDS[1:])}")
        students = {}
        for number, raw in enumerate(reader, 2):
            entry = {k.strip().lower(): (v or "").strip() for k, v in raw.items() if k}
            if not entry.get("id"):
                raise ValueError(f"the roster {path}, line {number}: no id")
            if entry["id"] in students:
                raise ValueError(f"the roster {path}, line {number}: the id {entry['id']!r} is there twice")
            students[entry["id"]] = entry
    return students


def student_id(name: str, pattern: str) -> str | None:
    """The student id in a submission's file name (``pattern``'s group ``id``), or None."""
    found = re.search(pattern, Path(name).name)
    return found.group("id") if found else None


def apply_roster(rows, exercise: Exercise, roster: dict, pattern: str = ID_PATTERN) -> list[Row]:
    """Rows with the student id filled in; students of the roster without a submission get a
    ``missing`` row; a student with two submissions, or a file matching nobody, is said in ``detail``."""
    if "id" not in re.compile(pattern).groupindex:
        raise ValueError(f"--pattern must have a group named id, as in {ID_PATTERN!r}, got {pattern!r}")
    rows = [dataclasses.replace(r) for r in rows]
    seen = Counter()
    for r in rows:
        r.student = student_id(r.submission, pattern) or ""
        seen[r.student] += 1
    for r in rows:
        extra = []
        if r.student not in roster:
            extra.append(f"not on the roster (id {r.student!r} from the file name)" if r.student
                         else f"no student id in the file name (--pattern {pattern!r})")
        elif seen[r.student] > 1:
            others = [o.submission for o in rows if o.student == r.student and o is not r]
            extra.append(f"duplicate: {r.student} also handed in {', '.join(others)}")
        r.detail = "; ".join([*extra, r.detail] if r.detail else extra)
    empty = dict.fromkeys(t.name for t in exercise.graded)
    for sid in roster:
        if sid not in seen:
            rows.append(Row("", "missing", None, len(exercise.graded), dict(empty), "no submission", student=sid))
    return sorted(rows, key=lambda r: (r.submission == "", r.submission, r.student))


# --------------------------------------------------------------------------- writing

def gradebook_fields(exercise: Exercise, roster: bool = False) -> list[str]:
    return ["submission", *(["student"] if roster else []), "status", "score", "max_score",
            *(t.name for t in exercise.graded), "outputs", "flags", "read_by_hand", "detail"]


def _cell(value):
    """A CSV cell a spreadsheet shows as text: a string that starts like a formula (= + - @, or a tab or
    carriage return before one) gets a leading apostrophe, as OWASP recommends."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _atomic_csv(out, rows: list[list], force: bool) -> None:
    """Write CSV rows atomically (a temporary file in the same folder, then a rename); an existing
    ``out`` is replaced only with ``force``."""
    out = Path(out)
    if out.exists() and not force:
        raise ValueError(f"{out} exists; pass --force to overwrite it")
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", dir=out.parent,
                                         prefix=f".{out.name}.", suffix=".tmp", delete=False)
    try:
        with handle:
            csv.writer(handle).writerows([[_cell(v) for v in row] for row in rows])
            handle.flush()
            os.fsync(handle.fileno())
        if out.exists() and not force:
            raise ValueError(f"{out} appeared while grading; pass --force to overwrite it")
        os.replace(handle.name, out)
    finally:
        if os.path.exists(handle.name):
            os.unlink(handle.name)


def write_gradebook(rows, exercise: Exercise, out, force: bool = False, roster: bool = False) -> None:
    """The gradebook CSV: one row per submission (and per missing student, with a roster)."""
    lines = [gradebook_fields(exercise, roster)]
    for r in rows:
        marks = ["" if r.tasks.get(t.name) is None else r.tasks[t.name] for t in exercise.graded]
        lines.append([r.submission, *([r.student] if roster else []), r.status, "" if r.score is None else r.score,
                      r.max_score, *marks, r.outputs, r.flags, r.read_by_hand, r.detail])
    _atomic_csv(out, lines, force)


#: Canvas's grade-import CSV: these five columns, then one column per assignment, named as Canvas
#: exports it ("Name (assignment id)"); the "Points Possible" row is optional and written.
CANVAS_FIELDS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def write_canvas(rows, roster: dict, assignment: str, out, force: bool = False) -> None:
    """A Canvas grade-import CSV of the roster's students (their best submission; missing: blank)."""
    if not assignment.strip():
        raise ValueError("--canvas-assignment must name the assignment column, e.g. 'DistilBERT exercise (1234)'")
    best = {}
    for r in rows:
        if r.student in roster and r.score is not None:
            best[r.student] = max(best.get(r.student, 0), r.score)
    possible = max((r.max_score for r in rows), default=0)
    lines = [CANVAS_FIELDS + [assignment], ["Points Possible", "", "", "", "", possible]]
    for sid, s in roster.items():
        lines.append([s.get("name", ""), s.get("canvas_id", ""), s.get("sis_user_id", "") or sid,
                      s.get("sis_login_id", ""), s.get("section", ""), best.get(sid, "")])
    _atomic_csv(out, lines, force)


def feedback_markdown(row: Row, exercise: Exercise) -> str:
    """What one student reads: each task's mark, the check's ✗ line and hint, what was repaired."""
    lines = [f"# Feedback: {Path(row.submission).name or row.student}", "",
             f"Score: **{'–' if row.score is None else row.score} of {row.max_score}** ({row.status})", ""]
    if row.status == "invalid":
        lines += [f"The grader could not grade this file: {row.detail}.", ""]
        return "\n".join(lines)
    lines += ["| task | mark | |", "|---|:-:|---|"]
    for t in exercise.graded:
        mark = row.tasks.get(t.name)
        lines.append(f"| {t.name} | {'–' if mark is None else mark} | {t.title} |")
    lines.append("")
    for t in exercise.graded:
        said = row.feedback.get(t.name) or []
        lost = [p.split(": ", 1)[1] for p in row.detail.split("; ") if p.startswith(f"{t.name}: ")]
        if said or lost:
            lines += [f"## {t.name}: {t.title}", "", *(f"- {line}" for line in said or lost), ""]
    if row.read_by_hand:
        lines += ["## Read by your instructor", "", "Not scored by the grader; your instructor reads it:", "",
                  *(f"- {part}" for part in row.read_by_hand.split("; ")), ""]
    others = [p for p in row.detail.split("; ") if p and not re.match(r"task\d+: ", p)]
    if others:
        lines += ["## About the run", "", *(f"- {p}" for p in others), ""]
    if row.outputs and row.outputs != REPRODUCED:
        lines += ["## Outputs", "", "Not every stored output came out the same on the grader's re-run "
                  f"(this costs no mark unless the instructor asks for it): {row.outputs}.", ""]
    return "\n".join(lines)


def write_feedback(rows, exercise: Exercise, folder) -> list[Path]:
    """One Markdown file per submission in ``folder`` (created), named after the submission."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written, used = [], Counter()
    for r in rows:
        if not r.submission:
            continue
        stem = Path(r.submission).stem
        used[stem] += 1
        path = folder / (f"{stem}.md" if used[stem] == 1 else f"{stem}-{used[stem]}.md")
        path.write_text(feedback_markdown(r, exercise) + "\n", encoding="utf-8")
        written.append(path)
    return written


def summary(rows, exercise: Exercise) -> str:
    """The table printed at the end: per graded task, how many of the submissions that ran passed it,
    and which mistakes (the checks' ✗ lines) how many made."""
    ran = [r for r in rows if r.status not in ("invalid", "missing")]
    width = max(len(t.name) for t in exercise.tasks)
    lines = [f"{'task':<{width}}  passed  title"]
    for t in exercise.tasks:
        if t.graded:
            passed = f"{sum(r.tasks[t.name] or 0 for r in ran)}/{len(ran)}"
            lines.append(f"{t.name:<{width}}  {passed:>6}  {t.title}")
        else:
            lines.append(f"{t.name:<{width}}  {'-':>6}  {t.title} (not graded: its result depends on the machine)")
    mistakes = Counter((t, line.split(" (hint:")[0]) for r in ran for t, said in r.feedback.items() for line in said)
    if mistakes:
        lines.append("mistakes (the checks' ✗ lines), most common first:")
        lines += [f"  {n:>3} × {t}: {line}" for (t, line), n in mistakes.most_common()]
    flagged = [r.submission for r in rows if r.flags]
    if flagged:
        lines.append(f"flagged (the grader's check disagrees with the notebook's): {', '.join(flagged)}")
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES if s != "missing"}
    handed = [r for r in rows if r.status != "missing"]
    lines.append(f"{len(handed)} submissions: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if len(handed) < len(rows):
        lines.append(f"{len(rows) - len(handed)} students of the roster handed in nothing")
    return "\n".join(lines)
