"""The commands: ``bertfamily-grade`` (a class into a gradebook), ``student`` and ``grade`` (one notebook)."""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from bertfamily import kernels
from bertfamily.grading import counting, feedbackfiles, lms, policy
from bertfamily.grading.canvas import canvas_points, write_canvas
from bertfamily.grading.causes import self_check_with_causes
from bertfamily.grading.classroom import Executor, LocalPool, default_jobs, grade_class, grade_notebook
from bertfamily.grading.exercise import Exercise
from bertfamily.grading.fingerprints import package_changes, package_files
from bertfamily.grading.gradebook import (
    ID_PATTERN,
    apply_roster,
    gradebook_fields,
    read_roster,
    summary,
    write_gradebook,
)
from bertfamily.grading.lateness import check_extensions, remember_extensions, remembered_extensions, time_warnings
from bertfamily.grading.marks import print_report
from bertfamily.grading.monitor import Limits
from bertfamily.grading.moodle import read_worksheet, write_moodle
from bertfamily.grading.mounts import UNSAFE_FLAG, SandboxMissing
from bertfamily.grading.regrade import Journaled, select
from bertfamily.grading.safeio import check_output_folder
from bertfamily.grading.sandbox import require_sandbox
from bertfamily.grading.student import write_student
from bertfamily.grading.submission import printable
from bertfamily.grading.textsafe import escape_controls

USAGE = """\
    python -m bertfamily.grading student SOURCE.ipynb DEST.ipynb [--force] [--grading TOML]
    python -m bertfamily.grading grade NOTEBOOK.ipynb --reference SOLUTION.ipynb [--sanitize CFG] [--json]
                                     [--grading TOML]  (sealed, as bertfamily-grade grades a class)
    python -m bertfamily.grading self-check NOTEBOOK.ipynb [--json]  (a student's check on their own machine: no grade)
    bertfamily-grade SUBMISSION... --reference SOLUTION.ipynb --out gradebook.csv [--sanitize CFG]
                     [--force] [--jobs N] [--strict-outputs]
                     [--feedback DIR] [--roster CSV [--pattern REGEX] [--canvas FILE --canvas-assignment NAME]]
                     [--moodle-worksheet CSV --moodle FILE] [--grading TOML] [--deadline TIME]
                     [--late none|penalty:N|refuse] [--extension STUDENT=TIME ...] [--counts POLICY]
                     [--resume] [--regrade STUDENT ...]
                     [--unsafe-no-sandbox]
"""


#: What ``--reference`` is, said where a command that grades is given none (exit code 2).
REFERENCE_REQUIRED = ("--reference: the solution notebook to grade against is required (the course's is "
                      "book/exercise_distilbert.ipynb)")
REFERENCE_HELP = ("the solution notebook that defines the tasks (required; the course's is "
                  "book/exercise_distilbert.ipynb)")
SANITIZE_HELP = ("the nbval sanitize file: the stored and re-run outputs are compared through its rules (the "
                 "course's is tests/sanitize.cfg; without it, as printed)")


def _require_reference(args) -> None:
    """Refuse a command that grades without ``--reference``, before anything else is looked at (the
    sandbox included): the grader knows no course folder to find a solution notebook in."""
    if not args.reference:
        raise ValueError(REFERENCE_REQUIRED)


def _check_out(path, force, label) -> Path:
    path = Path(path)
    if path.exists() and not force:
        raise ValueError(f"{path} exists; pass --force to overwrite it")
    if not path.parent.is_dir():
        raise ValueError(f"no folder {path.parent} for {label}")
    return path


def _main_gradebook(argv) -> int:
    parser = argparse.ArgumentParser(
        prog="bertfamily-grade",
        description="Regrade a class: re-execute each submission under nbval in a sandbox, check every answer "
                    "again outside the kernel, and write a gradebook (CSV). Other commands: 'student SOURCE DEST' "
                    "(the student version), 'grade NOTEBOOK' (one notebook, graded as a class is) and "
                    "'self-check NOTEBOOK' (a student's check on their own machine, no grade).")
    parser.add_argument("submissions", nargs="+", metavar="SUBMISSION", help="a notebook, or a folder of them")
    parser.add_argument("--out", required=True, help="the gradebook to write (CSV)")
    parser.add_argument("--reference", metavar="SOLUTION.ipynb", help=REFERENCE_HELP)
    parser.add_argument("--force", action="store_true",
                        help="overwrite an existing --out, --canvas and --moodle, and start over where a "
                             "journal holds rows of a run that did not finish")
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help="submissions at a time (default: one per core, as far as free memory allows: %(default)s)")
    parser.add_argument("--cell-timeout", type=float, default=Limits.cell_timeout,
                        help="seconds per cell (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=Limits.timeout,
                        help="seconds per notebook (default %(default)s)")
    parser.add_argument("--memory-mib", type=int, default=Limits.memory_mib,
                        help="memory of one run, kernel and its children (MiB, default %(default)s)")
    parser.add_argument("--disk-mib", type=int, default=Limits.disk_mib,
                        help="files one run may write, in its home and /tmp (MiB, default %(default)s; /dev/shm "
                             "is sized and counted by --memory-mib)")
    parser.add_argument("--strict-outputs", action="store_true",
                        help="a task also needs its stored outputs to reproduce on the re-run (handed in with outputs)")
    parser.add_argument("--feedback", metavar="DIR", help="write one Markdown feedback file per submission into DIR")
    parser.add_argument("--roster", metavar="CSV", help="the class list: a CSV with an 'id' column (and name, "
                        "canvas_id, sis_user_id, sis_login_id, section)")
    parser.add_argument("--pattern", default=None,
                        help="a regular expression with a group 'id' that finds the student id in a file name "
                             f"(default: none; the student is found from Canvas's or Moodle's names, the folder "
                             f"per student, or the file name up to its first _ - . or space, {ID_PATTERN!r})")
    parser.add_argument("--canvas", metavar="FILE", help="also write Canvas's grade-import CSV (needs --roster)")
    parser.add_argument("--canvas-assignment", default="", metavar="NAME",
                        help="the assignment's column in Canvas, e.g. 'DistilBERT exercise (1234)'")
    parser.add_argument(UNSAFE_FLAG, dest="unsafe", action="store_true",
                        help="run students' code WITHOUT the sandbox, as you, with your files and network "
                             "(only where bubblewrap cannot run, and only for code you trust)")
    parser.add_argument("--sanitize", metavar="CFG", help=SANITIZE_HELP)
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="grade on a Dask cluster, one task per submission: its scheduler's address "
                             "(tcp://host:8786), or 'local' for a cluster of --jobs workers on this machine")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows of an interrupted run (the journal OUT.journal beside --out) and grade "
                             "only the rest")
    week = parser.add_argument_group("the lecturer's week: points, deadline, regrades, Moodle")
    week.add_argument("--grading", metavar="TOML", help="the grading file: each task's points, bonus tasks, partial "
                      "credit, the deadline and the late policy (docs/INSTRUCTORS.md; default: 1 point a task)")
    week.add_argument("--deadline", metavar="TIME", help="the deadline, ISO 8601 with its offset "
                      "(2026-03-01T23:59+01:00); overrides the grading file's")
    week.add_argument("--late", metavar="POLICY", help="late work: none (accepted, flagged; the default), "
                      "penalty:N (N%% off per started day) or refuse (it earns nothing)")
    week.add_argument("--extension", action="append", metavar="STUDENT=TIME", help="one student's own deadline "
                      "(roster id or file name = ISO 8601 with its offset); repeat for more; over the grading "
                      "file's [deadline.extensions]. Canvas and Moodle say lateness themselves, extensions included")
    week.add_argument("--counts", choices=policy.COUNTS, help="which of a student's submissions counts "
                      "(default latest-before-deadline)")
    week.add_argument("--regrade", action="append", metavar="STUDENT", help="grade again only these students "
                      "(roster ids, or submissions by name; repeat or comma-separate) and update --out, the LMS "
                      "files and their feedback in place; every other row is kept from the journal")
    week.add_argument("--moodle-worksheet", metavar="CSV", help="Moodle's grading worksheet as downloaded: the "
                      "roster (without --roster) and the submission times")
    week.add_argument("--moodle", metavar="FILE", help="write the worksheet back with grades and comments, to upload "
                      "to Moodle (needs --moodle-worksheet)")
    args = parser.parse_args(argv)
    started = package_files()  # the course as installed when the grader starts (package_changes at the end)
    try:
        _require_reference(args)
        limits = Limits(args.cell_timeout, args.timeout, args.memory_mib, disk_mib=args.disk_mib,
                        sandbox=not args.unsafe)
        if min(limits.cell_timeout, limits.timeout, limits.memory_mib, limits.disk_mib) <= 0:
            raise ValueError("--cell-timeout, --timeout, --memory-mib and --disk-mib must be positive")
        if args.unsafe:
            print(f"WARNING: {UNSAFE_FLAG}: students' code runs as you, with your files and your network. "
                  "Grade untrusted submissions only in the sandbox (README: apt-get install bubblewrap).",
                  file=sys.stderr)
        else:
            require_sandbox()
        regrade = [n.strip() for given in args.regrade or [] for n in given.split(",") if n.strip()]
        update = bool(regrade) or args.force  # a regrade updates the files of the earlier run in place
        if regrade and not Path(args.out).is_file():
            raise ValueError(f"--regrade updates a gradebook graded before: no {args.out}")
        out = _check_out(args.out, update, "--out")
        canvas = _check_out(args.canvas, update, "--canvas") if args.canvas else None
        moodle = _check_out(args.moodle, update, "--moodle") if args.moodle else None
        if canvas and not args.roster:
            raise ValueError("--canvas needs --roster (Canvas imports grades by its students' ids): Canvas's own "
                             "gradebook export (Grades > Export) is a roster as it comes")
        if canvas and not args.canvas_assignment.strip():
            raise ValueError("--canvas needs --canvas-assignment, the assignment's column in Canvas, "
                             "e.g. 'DistilBERT exercise (1234)' (as Canvas's own grade export names it)")
        if moodle and not args.moodle_worksheet:
            raise ValueError("--moodle needs --moodle-worksheet, the grading worksheet downloaded from Moodle "
                             "(Moodle matches the grades to its participants by the worksheet's Identifier)")
        if args.pattern and (args.moodle_worksheet or regrade):
            raise ValueError("--pattern finds students in plain file names only: leave it out with Moodle's "
                             "worksheet and with --regrade")
        worksheet = read_worksheet(args.moodle_worksheet) if args.moodle_worksheet else None
        roster = read_roster(args.roster) if args.roster else worksheet[0] if worksheet else None
        points = canvas_points(args.roster, args.canvas_assignment) if canvas else None  # a typo: refused now
        found = lms.find(args.submissions)
        for f in [f for f in found if lms.canvas_test_student(f, roster)]:
            print(f"note: Canvas's Test Student (Student View) handed in {escape_controls(f.display)}: left out")
            found.remove(f)
        written = {f.path.resolve() for f in found}
        for given, label in ((out, "--out"), (canvas, "--canvas"), (moodle, "--moodle")):
            if given is not None and given.resolve() in written:
                raise ValueError(f"{label} {given} is one of the submissions: choose another path")
        if args.feedback and Path(args.feedback).resolve() in {p.parent for p in written}:
            raise ValueError(f"--feedback {args.feedback} is a folder of submissions: choose another folder")
        for given, label in ((args.feedback, "--feedback"), (out and out.parent, "--out's folder"),
                             (canvas and canvas.parent, "--canvas's folder"),
                             (moodle and moodle.parent, "--moodle's folder")):
            if given:  # no write through a link, none into what students handed in
                check_output_folder(given, args.submissions, label)
        exercise = Exercise.load(args.reference)
        if args.strict_outputs and not args.sanitize:
            print("warning: --strict-outputs without --sanitize: outputs must reproduce as printed (timings, "
                  "addresses and digits included); the course's rules are tests/sanitize.cfg", file=sys.stderr)
        extensions = remembered_extensions(out, args.extension or ())  # earlier runs' --extension, kept
        earlier = sorted(set(extensions) - set(args.extension or ()))
        if earlier:
            print(f"extensions given in earlier runs of {out.name}, applied again: {', '.join(earlier)} "
                  f"(kept in {out.name}.extensions: delete a line there to take one back)", file=sys.stderr)
        rules = policy.load(exercise, args.grading, due=args.deadline, late=args.late, counts=args.counts,
                            extensions=extensions)
        owners = {f.display: (lms.roster_match(f, roster)[0] if roster is not None else lms.plain_key(f))
                  for f in found}
        chosen = select(regrade, found, owners) if regrade else None
        if not args.pattern:  # with a pattern the students are known after grading: policy.apply checks then
            check_extensions(rules.extensions, {f.display: owners[f.display] for f in found}, roster or ())
        executor: Executor
        if args.scheduler:  # distributed stays optional: imported only here
            if regrade:
                raise ValueError("--regrade runs on this machine: leave out --scheduler (a few students need no "
                                 "cluster)")
            from bertfamily.grading.cluster import DaskCluster
            executor = DaskCluster(args.scheduler, out=out, jobs=args.jobs, resume=args.resume, force=args.force)
        else:
            executor = Journaled(LocalPool(args.jobs, fork_server=True), out, resume=args.resume, force=args.force,
                                 regrade=chosen)
        notebooks = [f.path for f in found if f.notebook]
        rows = grade_class(notebooks, exercise, limits, sanitize=args.sanitize, strict_outputs=args.strict_outputs,
                           executor=executor) if notebooks else []
        for warning in executor.said() if isinstance(executor, Journaled) else []:
            print(f"warning: {warning}", file=sys.stderr)
        tz = rules.due.tzinfo if rules.due else None
        if args.pattern:
            rows = apply_roster(rows, exercise, roster, args.pattern) if roster is not None else rows
            by_display = {f.display: f for f in found}
            rows = [dataclasses.replace(r) for r in rows]
            for r in rows:  # the hand-in time, as lms.attribute gives every layout's rows: deadlines apply
                if r.submission in by_display:
                    r.submitted, r.time_from = lms.submitted(by_display[r.submission], {}, tz)
        else:
            rows = lms.attribute(rows, found, exercise, roster, worksheet[1] if worksheet else None, tz)
        marks = rows
        for warning in time_warnings(rows, rules.due, moodle_status=worksheet is not None):
            print(f"warning: {warning}", file=sys.stderr)
        rows = policy.apply(rows, rules, exercise)
        tied = [r.submission for r in rows if counting.TIE in r.counts]
        if tied:  # one time for all of a participant's files (Moodle's worksheet): which one counts is a guess
            print(f"warning: {len(tied)} submission{'s' * (len(tied) != 1)} tied with another of the student's (one "
                  f"time for both): the higher score counts; check which the student meant (counts column): "
                  f"{', '.join(tied[:5])}", file=sys.stderr)
        changed = package_changes(started)
        if changed:  # rows graded before and after a change of the course: none of them is written
            raise ValueError(f"the installed course package changed while grading ({', '.join(changed[:5])}): "
                             "nothing was written. No kernel could change it (each had a read-only copy): "
                             "something on this machine did (a git pull, a pip install). Grade the class again "
                             "(--force starts over from the journal of the earlier code)")
        ran = [r for r in rows if r.status not in ("missing", "invalid")]  # one student's own failure is his row
        failed = [r for r in ran if r.status in ("error", "timeout")]
        if len(ran) >= 2 and len(failed) == len(ran):
            write_gradebook(rows, exercise, out, force=update, roster=any(r.student for r in rows),
                            timed=roster is not None or rules.due is not None)
            print(f"error: the grader failed on every submission, or each ran out of time ({failed[0].detail[:200]}): "
                  f"a limit too low for this machine, a broken installation? Their reasons are "
                  f"in {out}. No LMS file and no feedback was written: fix the cause, then grade again "
                  "(--force)", file=sys.stderr)
            return 1
        timed = roster is not None or rules.due is not None
        before, refreshed = (_lines_by_submission(out) if chosen else {}), chosen
        write_gradebook(rows, exercise, out, force=update, roster=any(r.student for r in rows), timed=timed)
        remember_extensions(out, extensions)
        if chosen:  # a deadline, an extension or points given now change others' lines: said, and their feedback
            after = _lines_by_submission(out)  # is written again with the gradebook's line
            also = sorted(s for s in after if s not in chosen and s in before and before[s] != after[s])
            if also:  # only the flags column changed: a copy of a regraded file's code, else the options
                flags = gradebook_fields(exercise, any(r.student for r in rows), timed).index("flags")
                why = ("a copy flag changed (their code matches a regraded file's, or no longer does)" if all(
                    before[s][:flags] + before[s][flags + 1:] == after[s][:flags] + after[s][flags + 1:] for s in also)
                    else "the grading options differ from the earlier run's (deadline, extensions, points)")
                print(f"warning: {why}: the lines of {len(also)} other submission{'s' * (len(also) > 1)} changed too "
                      f"({', '.join(also[:10])}{' ...' if len(also) > 10 else ''}); their feedback is written again",
                      file=sys.stderr)
                refreshed = set(chosen) | set(also)
        if canvas and roster is not None:  # --canvas needs --roster (refused above)
            for warning in write_canvas(rows, roster, args.canvas_assignment, canvas, force=update, points=points):
                print(f"warning: {warning}", file=sys.stderr)
        if moodle and worksheet is not None:  # --moodle needs --moodle-worksheet (refused above)
            for warning in write_moodle(rows, worksheet[2], moodle, force=update):
                print(f"warning: {warning}", file=sys.stderr)
        feedback, bundle, said = (feedbackfiles.write_all(rows, exercise, args.feedback, rules, refreshed)
                                  if args.feedback else ([], None, []))
        for warning in said:
            print(f"warning: {warning}", file=sys.stderr)
    except (ValueError, SandboxMissing) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(marks, exercise))
    print(rules.describe())
    late = [r.submission for r in rows if r.late]
    if late:
        print(f"late: {', '.join(late)}")
    print(f"gradebook: {out}" + (f"; Canvas import: {canvas}" if canvas else "")
          + (f"; Moodle worksheet: {moodle}" if moodle else "")
          + (f"; Moodle's feedback zip: {bundle}" if bundle else "")
          + (f"; regraded {len(chosen)} submission{'s' * (len(chosen) != 1)} in place" if chosen else "")
          + (f"; {len(feedback)} feedback file{'s' * (len(feedback) != 1)} in {args.feedback}"
             if args.feedback else ""))
    return 0


def _lines_by_submission(path) -> dict:
    """A gradebook's lines by their submission (the first column), as written; {} where there is none."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return {line[0]: line for line in list(csv.reader(handle))[1:] if line and line[0]}
    except OSError:
        return {}


def _handout_points(source, grading) -> dict | None:
    """What each task of the handout is worth: the grading file's points (default 1 a task); None for a
    notebook that is no gradable exercise (no task with a check), unless a grading file asks for it."""
    try:
        exercise = Exercise.load(source)
    except ValueError:
        if grading:
            raise
        return None
    return policy.handout_points(exercise, policy.load(exercise, grading))


def _main_commands(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertfamily.grading", description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("student", help="write the student version of a solution notebook")
    s.add_argument("source")
    s.add_argument("dest")
    s.add_argument("--force", action="store_true", help="overwrite DEST even if it differs")
    s.add_argument("--grading", metavar="TOML", help="the grading file: each task's heading shows its points "
                   "(default: 1 point a task)")
    g = sub.add_parser("grade", help="grade one notebook exactly as bertfamily-grade grades a class: in the "
                       "sandbox, every answer checked again outside it; prints its row and feedback")
    g.add_argument("notebook")
    g.add_argument("--cell-timeout", type=float, default=Limits.cell_timeout,
                   help="seconds per cell (default %(default)s)")
    g.add_argument("--timeout", type=float, default=Limits.timeout, help="seconds per notebook (default %(default)s)")
    g.add_argument("--memory-mib", type=int, default=Limits.memory_mib, help="memory of the run (default %(default)s)")
    g.add_argument("--reference", metavar="SOLUTION.ipynb", help=REFERENCE_HELP)
    g.add_argument("--sanitize", metavar="CFG", help=SANITIZE_HELP)
    g.add_argument("--grading", metavar="TOML", help="the grading file: the row in its points, as in the class's "
                   "gradebook (default: 1 point a task)")
    g.add_argument("--json", action="store_true", help="print the gradebook row as JSON")
    c = sub.add_parser("self-check", help="a student's self-check, not a grade: run a copy of your notebook on "
                       "this machine, as you, and list what its checks print")
    c.add_argument("notebook")
    c.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "student":
            outcome = write_student(args.source, args.dest, force=args.force,
                                    points=_handout_points(args.source, args.grading))
            print(f"{outcome}: {args.dest} (student version of {args.source})")
            return 0
        if args.command == "grade":
            return _grade_one(args)
        results, notes = self_check_with_causes(args.notebook, timeout=args.timeout)
    except (ValueError, SandboxMissing) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=1, ensure_ascii=False))
        return 0
    print_report(results)
    print("".join(f"note: {n}\n" for n in notes), end="")
    return 0


def _grade_one(args) -> int:
    """``grade NOTEBOOK``: the class's path for one file (:func:`grade_notebook`); never the notebook's own ✓."""
    _require_reference(args)
    limits = Limits(args.cell_timeout, args.timeout, args.memory_mib)
    require_sandbox()
    exercise = Exercise.load(args.reference)
    rules = policy.load(exercise, args.grading) if args.grading else None  # read before the run: a typo fails fast
    row = grade_notebook(args.notebook, exercise, limits, sanitize=args.sanitize)
    row, notes = policy.one_file(row, rules, exercise)
    print("".join(f"{n}\n" for n in notes), end="", file=sys.stderr)
    if args.json:  # ASCII: no control, bidirectional or invisible character of the student's reaches the terminal
        print(json.dumps(asdict(row), indent=1, ensure_ascii=True))
    else:  # as the feedback file shows it: a student's error message prints no escape sequence
        print(escape_controls(printable(feedbackfiles.feedback_text(row, exercise, rules)), keep="\n"))
        print(f"graded in the sandbox, as bertfamily-grade grades a class: {row.status}, "
              f"{'–' if row.score is None else row.score} of {row.max_score}")
    return 0


def main(argv=None) -> int:
    """``student`` and ``grade`` as before; anything else is a class to regrade into a gradebook."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "torch" not in sys.modules:  # `grade` runs its kernel in this environment
        os.environ.update(kernels.pinned_environ())
    if argv and argv[0] in ("student", "grade", "self-check"):
        return _main_commands(argv)
    return _main_gradebook(argv)
