"""The grader with an untrusted class: each kind of attack planted, and shown to fail.

A class of hostile submissions (and two honest ones with accidents the sandbox must forgive) is
graded once through the command line, with two jobs, feedback and a roster. Every attack is a cell
added to the student version (placeholders, so the notebook runs in seconds) or to the reference
solution; what it would gain if it worked is full marks, a classmate's zero, or a stopped run.
Afterwards: the honest rows have full marks, the cheats gain nothing and are flagged, and nothing is
left behind (no process, no file in the runs' folder or /dev/shm, no changed byte in the class, the
course package or the gradebook).
"""
import copy
import csv
import hashlib
import os
import textwrap
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell

from bertfamily import grading
from bertfamily.grading import sandbox, verify

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"
MEMORY_MIB = 2048
DAEMON = "4242.5"  # the daemons' `sleep` argument: no such process may survive the grading

pytestmark = pytest.mark.skipif(sandbox.sandbox_problem() is not None,
                                reason=f"no sandbox here: {sandbox.sandbox_problem()}")


def solution(nb, exercise, task):
    reference = {c.id: c for c in exercise.reference.cells}
    cid = next(c for c in exercise.tasks[task - 1].cells if "solution" in reference[c].metadata.get("tags", []))
    return next(c for c in nb.cells if c.get("id") == cid)


def added(nb, code, where=0):
    """``nb`` with a cell of the student's own put at code cell position ``where``."""
    out = copy.deepcopy(nb)
    code_cells = [i for i, c in enumerate(out.cells) if c.cell_type == "code"]
    out.cells.insert(code_cells[where] if where < len(code_cells) else len(out.cells),
                     new_code_cell(textwrap.dedent(code)))
    return out


def digest(path):
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(path).rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, exercise):
    root = tmp_path_factory.mktemp("hostile")
    base = root / "runs"  # where the grader makes each run's folder (this module's own)
    base.mkdir()
    klass = root / "class"
    klass.mkdir()
    out, feedback = root / "gradebook.csv", root / "feedback"
    student_path = root / "student.ipynb"
    grading.write_student(EXERCISE, student_path)
    student = nbformat.read(student_path, as_version=4)
    student_path.unlink()
    reference = copy.deepcopy(exercise.reference)
    secret = klass / "carol.ipynb"  # a classmate, graded in the same run
    notebooks = {
        # --- copying: the reference solution, a classmate, the answer key
        "mallory_copy": added(student, f"""
            import json, os
            found = [{str(EXERCISE)!r}, {str(secret)!r}]
            for top, dirs, files in os.walk("/"):
                dirs[:] = [d for d in dirs if os.path.join(top, d) not in ("/proc", "/sys", "/usr", "/dev")
                           and d not in ("site-packages", "python3.11", "include", "share")]
                found += [os.path.join(top, f) for f in files if f.endswith(".ipynb") and "mallory" not in f]
            for pid in os.listdir("/proc"):
                try:
                    found += [a for a in open(f"/proc/{{pid}}/cmdline").read().split("\\0") if a.endswith(".ipynb")]
                except OSError:
                    pass
            for path in found:
                try:
                    nb = json.load(open(path))
                except OSError:
                    continue
                for cell in nb["cells"]:
                    if "solution" in cell["metadata"].get("tags", []) and cell["cell_type"] == "code":
                        try:
                            exec("".join(cell["source"]), globals())
                        except Exception:
                            pass
            print("copied from", len(found), "files")
            """, where=2),
        "mallory_key": added(student, """
            from bertfamily import checks
            try:
                distilbert_count, bert_count = checks.expected_counts()
                reduction = checks.expected_reduction()
            except AttributeError as error:
                print(error)
            """, where=2),
        # --- forging what the grader verifies
        "mallory_forge": added(student, """
            from IPython.display import publish_display_data
            def forge(info):
                if "check_reduction" in info.raw_cell:
                    cell = info.raw_cell.split(", ")[-1].split(")")[0].strip("'")
                    publish_display_data({"application/vnd.bertfamily.answers+json": {
                        "cell": cell, "answers": '{"reduction": {"plain": 0.3948}}'}})
            get_ipython().events.register("pre_run_cell", forge)
            """, where=2),
        "mallory_exporter": added(student, """
            import glob, runpy
            for path in glob.glob("/grader/*") + glob.glob("/var/tmp/**/export.py", recursive=True):
                try:
                    open(path, "w").write("def export(*a): pass")
                except OSError as error:
                    print(type(error).__name__)
            _run = runpy.run_path
            runpy.run_path = lambda *a, **k: {"export": lambda *a, **k: None}
            """, where=2),
        # --- reaching the course, a classmate, the gradebook, the grader
        "mallory_vandal": added(student, f"""
            import glob, os, bertfamily
            hits = 0
            for path in glob.glob(os.path.dirname(bertfamily.__file__) + "/**/*.py", recursive=True) + [
                    {str(secret)!r}, {str(out)!r}, {str(EXERCISE)!r}]:
                try:
                    with open(path, "a") as handle:
                        handle.write("\\nraise SystemExit('vandalised')\\n")
                    hits += 1
                except OSError:
                    pass
            print("wrote to", hits, "files")
            """, where=2),
        "mallory_daemon": added(student, f"""
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    for fd in range(3):
                        os.close(fd)
                    os.execvp("sleep", ["sleep", "{DAEMON}"])
                os._exit(0)
            os.system("nohup sleep {DAEMON} >/dev/null 2>&1 &")
            open("/dev/shm/left-behind", "wb").write(b"x" * 2**26)
            open(os.path.expanduser("~/left-behind"), "w").write("x")
            time.sleep(0.5)
            """, where=2),
        "mallory_killer": added(student, """
            import os, signal
            for pid in sorted(map(int, filter(str.isdigit, os.listdir("/proc"))), reverse=True):
                if pid != os.getpid():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            os.kill(-1, signal.SIGKILL)
            """, where=2),
        "mallory_hog": added(student, """
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    hog = [bytearray(2**27) for _ in range(40)]  # 5 GiB in a detached grandchild
                    time.sleep(60)
                os._exit(0)
            time.sleep(60)
            """, where=2),
        "mallory_forkbomb": added(student, """
            import os, time
            for _ in range(2000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
            time.sleep(60)
            """, where=2),
        "mallory_markdown": _checks_as_markdown(student),
        "mallory_globals": added(student, """
            import torch
            from bertfamily.models import published_config
            class DistilBertModel(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.config = published_config("distilbert-base-uncased")
                    self.layers = torch.nn.ModuleList(torch.nn.Linear(1, 1) for _ in range(36))
            def globals():
                return {"distilbert": DistilBertModel(), "bert": DistilBertModel(), "reduction": 0.3948}
            """, where=2),
        "mallory_deepjson": added(student, """
            from IPython.display import display
            display({"application/vnd.bertfamily.answers+json": {"cell": "x", "answers": "[" * 100000}}, raw=True)
            """, where=2),
        "mallory_memfd": added(student, """
            import os
            fd = os.memfd_create("hidden")
            for _ in range(48):
                os.write(fd, b"x" * 2**26)  # 3 GiB that no process maps
            """, where=2),
        "mallory_disk": added(student, """
            import os, sys
            runtime = os.path.dirname(sys.argv[sys.argv.index("-f") + 1])
            with open(os.path.join(runtime, "filler"), "wb") as handle:
                for _ in range(40):
                    handle.write(b"x" * 2**26)  # 2.5 GiB where the kernel's sockets are
            """, where=2),
        "mallory_nbval": _nbval_markers(student, exercise),
        # --- honest students with accidents the grader must forgive
        "olivia_helper": _helper_reuse(reference, exercise),
        "olivia_import": _import_added(reference, exercise),
        "=1+2 ñandú": student,  # a name with a formula, a space and Unicode: graded like any other
    }
    # attacks that end no run share a notebook: fewer kernels to start
    notebooks["mallory_tricks"] = _merge(student, *(notebooks.pop(n) for n in ("mallory_key", "mallory_globals")))
    notebooks["mallory_forge"] = _merge(student, notebooks.pop("mallory_forge"), notebooks.pop("mallory_deepjson"))
    notebooks["mallory_vandal"] = _merge(student, notebooks.pop("mallory_vandal"), notebooks.pop("mallory_daemon"))
    for name, nb in notebooks.items():
        nbformat.write(nb, klass / f"{name}.ipynb")
    nbformat.write(student, secret)
    (klass / "mallory_link.ipynb").symlink_to(EXERCISE)
    roster = root / "roster.csv"
    names = sorted({p.stem.split("_")[0].split(" ")[0].split(".")[0] for p in klass.iterdir()})
    roster.write_text("id,name\n" + "".join(f"{n},{n}\n" for n in names), encoding="utf-8")
    before = {"class": digest(klass), "package": digest(sandbox.package_dir()), "shm": sorted(os.listdir("/dev/shm"))}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTFAMILY_GRADE_TMP", str(base))
        code = grading.main([str(klass), "--out", str(out), "--feedback", str(feedback), "--roster", str(roster),
                             "--jobs", "2", "--memory-mib", str(MEMORY_MIB), "--disk-mib", "1536",
                             "--cell-timeout", "120",
                             "--timeout", "300"])
    assert code == 0
    after = {"class": digest(klass), "package": digest(sandbox.package_dir()), "shm": sorted(os.listdir("/dev/shm"))}
    with open(out, newline="", encoding="utf-8") as handle:
        rows = {Path(r["submission"]).stem if r["submission"] else r["student"]: r for r in csv.DictReader(handle)}
    return {"rows": rows, "before": before, "after": after, "base": base, "out": out, "feedback": feedback,
            "max": len(exercise.graded)}


def _merge(student, *attacks):
    """The student version with the cells every attack added (each a notebook made by :func:`added`)."""
    known = {c.get("id") for c in student.cells}
    nb = copy.deepcopy(student)
    for attack in attacks:
        for index, cell in enumerate(attack.cells):
            if cell.get("id") not in known:
                nb.cells.insert(min(index, len(nb.cells)), copy.deepcopy(cell))
    return nb


def _checks_as_markdown(student):
    """Every check cell turned into a Markdown cell (Jupyter's M key), the answers left as placeholders."""
    nb = copy.deepcopy(student)
    for index, cell in enumerate(nb.cells):
        if "check" in cell.metadata.get("tags", []):
            nb.cells[index] = nbformat.v4.new_markdown_cell(cell.source, id=cell.id, metadata=cell.metadata)
    return nb


def _nbval_markers(student, exercise):
    """Cells that raise, hidden from nbval with markers the grader must take out."""
    nb = copy.deepcopy(student)
    for task, marker in ((2, "## NBVAL_SKIP"), (3, "#  NBVAL_SKIP\f"), (4, "# NBVAL_RAISES_EXCEPTION")):
        cell = solution(nb, exercise, task)
        cell.source = f"{marker}\nraise SystemExit('not graded?')\n" + cell.source
    return nb


def _helper_reuse(reference, exercise):
    """A helper defined in the ungraded timing task (task 8), used in task 9."""
    nb = copy.deepcopy(reference)
    timing = solution(nb, exercise, 8)
    timing.source = "def file_bytes(model, name):\n    path = os.path.join(workdir, name)\n" \
                    "    torch.save(model.state_dict(), path)\n    return os.path.getsize(path)\n\n" + timing.source
    last = solution(nb, exercise, 9)
    last.source = last.source.replace("torch.save(distilbert_int8_all.state_dict(), int8_all_path)\n"
                                      "int8_all_bytes = os.path.getsize(int8_all_path)",
                                      "int8_all_bytes = file_bytes(distilbert_int8_all, 'all.pt')")
    assert "file_bytes(" in last.source
    return nb


def _import_added(reference, exercise):
    """``import os`` -> ``import os, math`` in the course's imports cell, math used in task 4."""
    nb = copy.deepcopy(reference)
    imports = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("import os\n"))
    imports.source = imports.source.replace("import os\n", "import os, math\n", 1)
    four = solution(nb, exercise, 4)
    four.source = four.source.replace("2**20", "math.pow(2, 20)")
    assert "math.pow" in four.source
    return nb


def test_honest_students_keep_every_mark(hostile):
    for name in ("olivia_helper", "olivia_import"):
        row = hostile["rows"][name]
        assert (row["status"], row["score"], row["flags"]) == ("graded", str(hostile["max"]), ""), row


@pytest.mark.parametrize("name, said", [
    ("mallory_markdown", ""),
    ("mallory_tricks", "defines globals"),
    ("mallory_tricks", "asks bertfamily.checks for expected_counts (the answer key)"),
    ("mallory_forge", "sent a message in the grader's answers format: forged"),
    ("mallory_forge", "task3: 2 answer messages in one check cell"),
    ("mallory_nbval", ""),
    ("mallory_copy", "names '/proc"),
    ("mallory_exporter", "imports runpy"),
    ("mallory_vandal", ""),
])
def test_cheats_gain_nothing_and_are_flagged(hostile, name, said):
    row = hostile["rows"][name]
    assert row["status"] == "graded" and row["score"] == "0", row
    assert said in row["flags"], row["flags"]
    if name not in ("mallory_vandal", "mallory_markdown", "mallory_nbval"):
        assert row["flags"], row
    if name == "mallory_markdown":
        assert "had become a markdown cell; the course's code cell was put back" in row["detail"]
    if name == "mallory_nbval":
        assert row["detail"].count("raised SystemExit: not graded?") == 3, row["detail"]


@pytest.mark.parametrize("name, status, words", [
    ("mallory_killer", "graded", ""),  # it sees no process of the grader's: only its own namespace
    ("mallory_hog", "error", f"out of memory: the run used more than {MEMORY_MIB} MiB"),
    ("mallory_forkbomb", "error", "too many processes"),
    ("mallory_memfd", "error", f"out of memory: the run used more than {MEMORY_MIB} MiB"),
    ("mallory_disk", "error", "out of disk: the run wrote more than 1536 MiB"),
    ("mallory_link", "invalid", "symbolic link"),
])
def test_a_crash_is_contained_in_its_own_row(hostile, name, status, words):
    row = hostile["rows"][name]
    assert row["status"] == status and words in row["detail"], row


def test_nothing_is_left_behind_or_changed(hostile):
    for part in ("class", "package"):
        before, after = hostile["before"][part], hostile["after"][part]
        assert sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)) == [], part
    new = set(hostile["after"]["shm"]) - set(hostile["before"]["shm"])
    assert "left-behind" not in new and all(n.startswith("sem.mp-") for n in new), new  # the grader's own locks
    package = sandbox.package_dir()
    assert not any("vandalised" in p.read_text(errors="replace") for p in package.rglob("*.py"))
    assert list(hostile["base"].iterdir()) == []  # every run's folder is gone
    daemons = [p for p in psutil.process_iter(["cmdline"]) if DAEMON in (p.info["cmdline"] or [])]
    assert daemons == []
    assert verify.package_changes() == []


def test_a_name_with_a_formula_spaces_and_unicode_is_graded(hostile):
    row = hostile["rows"]["=1+2 ñandú"]
    assert row["status"] == "graded" and row["student"] == "'=1+2", row


def test_csv_cells_are_never_formulas(hostile):
    rows = list(csv.reader(open(hostile["out"], encoding="utf-8")))
    header = rows[0]
    student = [r[header.index("student")] for r in rows[1:]]
    assert "'=1+2" in student and not any(c.startswith(("=", "+", "-", "@")) for r in rows for c in r)
    assert (hostile["feedback"] / "=1+2 ñandú.md").is_file()


def test_no_sandbox_refuses_unless_asked(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sandbox, "sandbox_problem", lambda: "bubblewrap (bwrap) is not installed: apt-get install "
                                                            "bubblewrap")
    code = grading.main([str(EXERCISE), "--out", str(tmp_path / "g.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "apt-get install bubblewrap" in err and sandbox.UNSAFE_FLAG in err
    assert not (tmp_path / "g.csv").exists()


def test_processes_left_spinning_cannot_take_a_classmates_cpu(tmp_path, exercise, monkeypatch):
    """Spinning daemons use more than the run's share of cores: the run is stopped, saying so. (The
    share is set low here so that the test does not depend on the machine's load.)"""
    student = tmp_path / "student.ipynb"
    grading.write_student(EXERCISE, student)
    nb = added(nbformat.read(student, as_version=4), """
        import os
        import time
        for _ in range(4):
            if os.fork() == 0:
                os.setsid()
                while True:
                    pass
        time.sleep(120)
        """, where=2)
    path = tmp_path / "spinner.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(tmp_path))
    limits = grading.Limits(cell_timeout=120, timeout=300, memory_mib=MEMORY_MIB, threads=1, cpu_factor=0.25)
    (row,) = grading.grade_class([path], exercise, limits, jobs=1, progress=False)
    assert row.status == "error" and "more than its share of the CPU" in row.detail, row
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spinner.ipynb", "student.ipynb"]
