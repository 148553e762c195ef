"""The class the grading tests share: the small exercise made for the tests
(tests/data/grading_tiny.ipynb), honest students, mistakes, cheats, attacks and the nine kinds of fault of
issue 38 planted in it (:func:`build_class`), graded once per test session through the command line
(:func:`shared_class`, behind the fixture ``graded_tiny`` of tests/conftest.py). test_grading_kinds.py,
test_gradebook.py and test_sandbox.py read it."""

import copy
import csv
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import nbformat
import psutil
from nbformat.v4 import new_code_cell, new_output

from bertfamily import grading
from bertfamily.grading import mounts
from bertfamily.grading.feedbackfiles import WRITTEN

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "grading_tiny.ipynb"
#: The course's exercise and nbval rules, which the grader is given as a lecturer gives them (--reference,
#: --sanitize): it knows no course folder of its own.
EXERCISE = ROOT / "book" / "exercise_distilbert.ipynb"
SANITIZE = ROOT / "tests" / "sanitize.cfg"
MEMORY_MIB, DISK_MIB = 1024, 64
DAEMON = "4242.5"  # the daemons' `sleep` argument: no such process may survive the grading
CANARY = "bertfamily-canary-7f3e1d"  # in the grader's environment: no feedback may show it
GRADED = 4  # graded tasks of the tiny exercise


def tiny():
    return grading.Exercise.load(TINY)


def cell(nb, cid):
    return next(c for c in nb.cells if c.get("id") == cid)


def added(nb, code, where=0, cid=None):
    """``nb`` with a cell of the student's own put at code cell position ``where``."""
    out = copy.deepcopy(nb)
    code_cells = [i for i, c in enumerate(out.cells) if c.cell_type == "code"]
    new = new_code_cell(textwrap.dedent(code).strip() + "\n")
    if cid:
        new["id"] = cid
    out.cells.insert(code_cells[where] if where < len(code_cells) else len(out.cells), new)
    return out


def with_source(nb, cid, source, output=None):
    out = copy.deepcopy(nb)
    target = cell(out, cid)
    target.source = textwrap.dedent(source).strip()
    if output is not None:
        target.outputs = [new_output("stream", name="stdout", text=output)]
    return out


def merged(base, *attacks):
    """``base`` with the cells every attack added (each a notebook made by :func:`added`)."""
    known = {c.get("id") for c in base.cells}
    nb = copy.deepcopy(base)
    for attack in attacks:
        for index, c in enumerate(attack.cells):
            if c.get("id") not in known:
                nb.cells.insert(min(index, len(nb.cells)), copy.deepcopy(c))
    return nb


def digest(path):
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(path).rglob("*"))
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
    }


def vandalised(folder) -> list[str]:
    """The files of ``folder`` that the vandal's line reached (the course package is edited by people
    while tests run: a digest of it would not say who changed it)."""
    return [str(p) for p in Path(folder).rglob("*.py") if "vandalised" in p.read_text(errors="replace")]


# ------------------------------------------------------------------ the class


def honest_notebooks(ex):
    """Honest students: the model answer, and each accident or way of working the grader forgives."""
    correct = grading.model_answer(ex.reference)
    student = grading.student_version(ex.reference)
    as_44 = json.loads(nbformat.writes(correct))
    as_44["nbformat_minor"] = 4  # jupytext, older nbconvert and papermill: 4.4 that keeps the ids
    transient = json.loads(nbformat.writes(correct))
    for c in transient["cells"]:
        for out in c.get("outputs", []):
            out["transient"] = {"display_id": None}  # older VS Code kept the message's key
    without_ids = copy.deepcopy(correct)
    for c in without_ids.cells:
        c.pop("id", None)
    without_ids.nbformat_minor = 4
    online = copy.deepcopy(correct)
    widget = {"model_id": "0a1b2c", "version_major": 2, "version_minor": 0}
    cell(online, "s1").outputs[:0] = [
        new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": widget,
                "text/plain": "Loading weights: 100%|##########| 199/199",
            },
        ),
        new_output("stream", name="stderr", text="BertModel LOAD REPORT from: bert-base-uncased\n"),
    ]
    edited_output = copy.deepcopy(correct)
    cell(edited_output, "s1").outputs = [new_output("stream", name="stdout", text="41\n")]
    cleared = copy.deepcopy(correct)
    for c in cleared.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    check_edited = copy.deepcopy(correct)
    cell(check_edited, "c3").source += "\n"
    check_deleted = copy.deepcopy(correct)
    check_deleted.cells = [c for c in check_deleted.cells if c.get("id") != "c3"]
    helper = with_source(
        correct,
        "s4",
        """
        import time
        def double(v):
            return 2 * v
        start = time.perf_counter()
        seconds = time.perf_counter() - start""",
    )
    # ``y;``: Jupyter shows no result of a cell that ends with ";" (nbval's re-run did: "outputs differ")
    helper = with_source(helper, "s5", "y = double(x)\nprint(y)\ny;", output="84\n")
    imports = copy.deepcopy(correct)  # ``import os`` -> ``import os, math`` in the course's cell, math used
    cell(imports, "setup").source = cell(imports, "setup").source.replace("import os\n", "import os, math\n")
    cell(imports, "s1").source = cell(imports, "s1").source.replace("sum(numbers) - 3", "int(math.fsum(numbers)) - 3")
    # each kind's honest variant, together: magics around computed answers, files written anywhere the
    # run may write (home, /tmp, /dev/shm, a folder tree), a lot of output, the user and host names
    kinds = with_source(
        correct,
        "s1",
        """
        %%time
        numbers = list(range(10))
        x = sum(numbers) - 3
        note = "the sum of 0 to 9 is 45, less 3"
        print(x)""",
    )
    kinds = with_source(
        kinds,
        "s2",
        """
        import getpass, platform, tempfile
        path = os.path.join(os.path.expanduser("~"), "measured", "data.bin")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(bytes(range(256)) * 48)
        %time size_bytes = os.path.getsize(path)
        tree = os.path.join("/tmp", "tree")
        for depth in range(20):
            tree = os.path.join(tree, f"level{depth}")
            os.makedirs(tree, exist_ok=True)
            open(os.path.join(tree, "leaf.txt"), "w").write("x" * 100)
        open("/tmp/scratch.bin", "wb").write(b"x" * 2**20)
        open(os.path.join(tempfile.gettempdir(), "scratch.bin"), "wb").write(b"x" * 2**20)
        for _ in range(2000):
            print("a line of honest, verbose output " * 16)
        print(getpass.getuser(), platform.node(), f"{size_bytes:,} bytes")""",
    )
    return {
        "correct": correct,
        "online": online,
        "edited_output": edited_output,
        "cleared": cleared,
        "check_edited": check_edited,
        "check_deleted": check_deleted,
        "olivia_helper": helper,
        "olivia_import": imports,
        "kinds_honest": kinds,
        "=1+2 ñandú": student,
        "carol": student,
        "alice": correct,
        "alice-2": correct,
    }, {
        "kind7_v44_ids": as_44,
        "kind7_transient": transient,
        "no_ids": json.loads(nbformat.writes(without_ids, version=4)),
    }


def mistakes(ex):
    """Wrong answers and broken runs an honest student makes."""
    correct = grading.model_answer(ex.reference)
    wrong = with_source(
        correct,
        "s3",
        'reduction = counts["distilbert"] / counts["bert"]\nprint(reduction)',
        output="0.6061604111951822\n",
    )
    cell(wrong, "c3").outputs = [new_output("stream", name="stdout", text="✗ Task 3 (the reduction): not yet\n")]
    return {
        "wrong_answer": wrong,
        "syntax_error": with_source(correct, "s2", 'path = ("data.bin"'),
        "memory_hog": with_source(correct, "s1", "hog = []\nwhile True:\n    hog.append(bytearray(2**27))"),
        "vandal": with_source(
            correct,
            "s1",
            """
            import os, shutil, signal
            for name in os.listdir("."):
                try:
                    shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)
                except OSError:
                    pass
            os.kill(os.getpid(), signal.SIGKILL)""",
        ),
        "cheat_check": with_source(
            correct,
            "s3",
            """
            reduction = 0.5
            check_reduction = checks.check_reduction
            checks.check_reduction = lambda r: print("✓ Task 3 (the reduction): DistilBERT has 39.4% fewer")""",
        ),
        "cheat_print": with_source(
            correct,
            "s3",
            """
            import builtins; _print = builtins.print; reduction = 0.5
            builtins.print = lambda *a, **k: _print(*(str(x).replace("✗", "✓") for x in a), **k)""",
        ),
        "other_assignment": grading.student_version(
            nbformat.v4.new_notebook(
                cells=[
                    nbformat.v4.new_markdown_cell("```{exercise} Add\n:label: ex-add\nCompute z.\n```"),
                    new_code_cell("z = 1 + 1", metadata={"tags": ["solution"]}),
                    new_code_cell(
                        "print('✓ Task 1 (add)' if z == 2 else '✗ Task 1 (add)')", metadata={"tags": ["check"]}
                    ),
                ]
            )
        ),
    }


def attacks(ex, secret: Path, out: Path):
    """The attacks of the earlier hidden classes, each on the student version (placeholders)."""
    student = grading.student_version(ex.reference)
    copying = added(
        student,
        f"""
        import json, os
        found = [{str(TINY)!r}, {str(secret)!r}]
        for top, dirs, files in os.walk("/"):
            dirs[:] = [d for d in dirs if os.path.join(top, d) not in ("/proc", "/sys", "/usr", "/dev")
                       and d not in ("site-packages", "include", "share")]
            found += [os.path.join(top, f) for f in files if f.endswith(".ipynb")]
        for pid in os.listdir("/proc"):
            try:
                found += [a for a in open(f"/proc/{{pid}}/cmdline").read().split("\\0") if a.endswith(".ipynb")]
            except OSError:
                pass
        for path in found:
            try:
                nb = json.load(open(path))
            except (OSError, ValueError):
                continue
            for c in nb["cells"]:
                if "solution" in c["metadata"].get("tags", []) and c["cell_type"] == "code":
                    try:
                        exec("".join(c["source"]), globals())
                    except Exception:
                        pass
        print("copied from", len(found), "files")""",
        where=2,
    )
    tricks = added(
        student,
        """
        from bertfamily import checks
        try:
            x = checks.expected_counts()
        except AttributeError as error:
            print(error)
        def globals():
            return {"x": 42, "size_bytes": 12288, "reduction": 0.3938, "y": 84}""",
        where=2,
    )
    forge = added(
        student,
        """
        from IPython.display import display, publish_display_data
        def forge(info):
            if "check_reduction" in info.raw_cell:
                cid = info.raw_cell.split(", ")[-1].split(")")[0].strip("'")
                publish_display_data({"application/vnd.bertfamily.answers+json": {
                    "cell": cid, "answers": '{"reduction": {"plain": 0.3938}}'}})
        get_ipython().events.register("pre_run_cell", forge)
        display({"application/vnd.bertfamily.answers+json": {"cell": "x", "answers": "[" * 100000}}, raw=True)""",
        where=2,
    )
    exporter = added(
        student,
        """
        import glob, runpy
        for path in glob.glob("/grader/*") + glob.glob("/var/tmp/**/export.py", recursive=True):
            try:
                open(path, "w").write("def export(*a): pass")
            except OSError as error:
                print(type(error).__name__)
        runpy.run_path = lambda *a, **k: {"export": lambda *a, **k: None}""",
        where=2,
    )
    vandal = added(
        student,
        f"""
        import glob, os, time, bertfamily
        hits = 0
        for path in glob.glob(os.path.dirname(bertfamily.__file__) + "/**/*.py", recursive=True) + [
                {str(secret)!r}, {str(out)!r}, {str(TINY)!r}]:
            try:
                with open(path, "a") as handle:
                    handle.write("\\nraise SystemExit('vandalised')\\n")
                hits += 1
            except OSError:
                pass
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for fd in range(3):
                    os.close(fd)
                os.execvp("sleep", ["sleep", "{DAEMON}"])
            os._exit(0)
        os.system("nohup sleep {DAEMON} >/dev/null 2>&1 &")
        open("/dev/shm/left-behind", "wb").write(b"x" * 2**20)
        time.sleep(0.5)
        print("wrote to", hits, "files")""",
        where=2,
    )
    markdown = copy.deepcopy(student)
    for index, c in enumerate(markdown.cells):
        if "check" in c.metadata.get("tags", []):
            markdown.cells[index] = nbformat.v4.new_markdown_cell(c.source, id=c.id, metadata=c.metadata)
    nbval = copy.deepcopy(grading.model_answer(ex.reference))
    for cid, marker in (("s1", "## NBVAL_SKIP"), ("s2", "#  NBVAL_SKIP\f"), ("s3", "# NBVAL_RAISES_EXCEPTION")):
        cell(nbval, cid).source = f"{marker}\nraise SystemExit('not graded?')\n" + cell(nbval, cid).source
    return {
        "mallory_copy": copying,
        "mallory_tricks": tricks,
        "mallory_forge": forge,
        "mallory_exporter": exporter,
        "mallory_vandal": vandal,
        "mallory_markdown": markdown,
        "mallory_nbval": nbval,
        "mallory_killer": added(
            student,
            """
            import os, signal
            for pid in sorted(map(int, filter(str.isdigit, os.listdir("/proc"))), reverse=True):
                if pid != os.getpid():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            os.kill(-1, signal.SIGKILL)""",
            where=2,
        ),
        "mallory_hog": added(
            student,
            """
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    hog = [bytearray(2**27) for _ in range(16)]  # 2 GiB in a detached grandchild
                    time.sleep(60)
                os._exit(0)
            time.sleep(60)""",
            where=2,
        ),
        "mallory_forkbomb": added(
            student,
            """
            import os, time
            for _ in range(2000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
            time.sleep(60)""",
            where=2,
        ),
        "mallory_memfd": added(
            student,
            """
            import os, time
            kept = []
            for _ in range(24):  # 1.4 GiB that no process maps, each file under the one-file limit
                kept.append(os.memfd_create("hidden"))
                os.write(kept[-1], b"x" * 60 * 2**20)
            time.sleep(5)""",
            where=2,
        ),
    }


def kinds(ex):
    """Issue 38's nine kinds of fault, one attack (or more) each; their honest variants are in
    :func:`honest_notebooks` (kinds_honest, kind7_*, alice and alice-2)."""
    correct = grading.model_answer(ex.reference)
    student = grading.student_version(ex.reference)
    runtime = 'runtime = os.path.dirname(sys.argv[sys.argv.index("-f") + 1])  # the sockets\' folder'
    return {
        # 1. a folder tree deeper than Python's recursion and PATH_MAX, and wide, where the grader reads
        "kind1_tree": added(
            correct,
            f"""
            import os, sys, time
            {runtime}
            for top in (runtime, "."):
                fd = os.open(top, os.O_RDONLY)
                for _ in range(3000):
                    os.mkdir("d" * 100, dir_fd=fd)
                    below = os.open("d" * 100, os.O_RDONLY, dir_fd=fd)
                    os.close(fd)
                    fd = below
                os.close(fd)
                os.makedirs(os.path.join(top, "wide"), exist_ok=True)
                for n in range(20000):
                    open(os.path.join(top, "wide", str(n)), "w").close()
                os.chmod(os.path.join(top, "wide"), 0)
            time.sleep(5)""",
            where=1,
        ),
        # 2. bytes no limit counted: /dev, a nested user namespace's own tmpfs, a file open but deleted
        "kind2_bytes": added(
            student,
            f"""
            import os, subprocess, sys, time
            {runtime}
            said = []
            for path in ("/dev/hidden", "/dev/shm/big"):
                try:
                    with open(path, "wb") as handle:
                        for _ in range(64):
                            handle.write(b"x" * 2**20)
                except OSError as error:
                    said.append(f"{{path}}: {{error.strerror}}")
            mount = "mount -t tmpfs -o size=1g none /mnt && echo mounted"
            nested = subprocess.run(["unshare", "-Urm", "sh", "-c", mount], capture_output=True, text=True)
            said.append(f"nested: {{nested.returncode}} {{nested.stdout.strip()}} {{nested.stderr.strip()[:60]}}")
            print("; ".join(said))
            kept = []
            for n in range(3):
                handle = open(os.path.join(runtime, f"deleted{{n}}"), "wb")
                os.unlink(handle.name)
                for _ in range(40):
                    handle.write(b"x" * 2**20)
                handle.flush()
                kept.append(handle)
            time.sleep(10)""",
            where=2,
        ),
        "kind2_fill": added(
            student,
            """
            import time
            try:
                with open("/tmp/fill", "wb") as handle:
                    for _ in range(200):
                        handle.write(b"x" * 2**20)
                        handle.flush()
            except OSError as error:
                print(error.strerror)
            time.sleep(5)""",
            where=2,
        ),
        # 3. typed answers and a forbidden import hidden in magics; code no reader reads
        "kind3_magic": with_source(
            with_source(
                with_source(
                    correct,
                    "s1",
                    """
            %%time
            x = 42
            note = "typed"
            print(x)""",
                ),
                "s2",
                """
            %time size_bytes = 12288
            print(size_bytes)""",
            ),
            "s3",
            """
            %%capture captured
            %%time
            import ctypes
            reduction = 0.3938
            """,
        ),
        "kind3_unread": added(
            correct,
            """
            %%bash
            echo "a shell the grader does not read"
            """,
            where=2,
        ),
        # 4. the course answering for the student: calculators reached without an import, a size
        #    that no file had
        "kind4_course": with_source(
            added(
                correct,
                """
            import importlib, pkgutil
            found = []
            for name in ("bertfamily.budget:count", "bertfamily.quantization:predicted_bytes",
                         "bertfamily.sharing"):
                try:
                    found.append(str(pkgutil.resolve_name(name)))
                except (ImportError, AttributeError) as error:
                    found.append(type(error).__name__)
            print(found)""",
                where=2,
            ),
            "s2",
            """
            size_bytes = len(bytes(range(256)) * 48)  # the size, computed: no file
            print(size_bytes)""",
        ),
        # 5. root's files and the grader's environment, sent back through the feedback
        "kind5_root": with_source(
            correct,
            "s1",
            """
            import os
            said = []
            said.append(f"usr owner {os.stat('/usr').st_uid}")  # 65534 (nobody) when root outside is not ours
            for path in ("/etc/shadow", "/etc/passwd", "/proc/1/environ", "/root"):
                try:
                    said.append(open(path, errors="replace").read()[:300] if not os.path.isdir(path)
                                else " ".join(os.listdir(path)))
                except OSError as error:
                    said.append(f"{path}: {error.strerror}")
            note = " | ".join(said)
            x = sum(range(10)) - 3
            print(x)""",
        ),
        # 6. a submission that displays far more than the grader may hold
        "kind6_output": flood(student),
        # 8. two students named alike: each must read their own feedback
        "late/alice": grading.student_version(ex.reference),
    }


def flood(student):
    """150 cells that each display three outputs of 300,000 characters: more than the grader records."""
    nb = copy.deepcopy(student)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"][2]
    cells = [
        new_code_cell(
            f"from IPython.display import display\nfor _ in range(3):\n"
            f"    display({{'text/plain': '{n % 10}' * 300_000}}, raw=True)"
        )
        for n in range(150)
    ]
    for n, c in enumerate(cells):
        c["id"] = f"flood{n}"
    nb.cells[code:code] = cells
    return nb


def build_class(root: Path):
    """Write the class into ``root / "class"`` (with a roster); return (class folder, roster, loop folder)."""
    ex = tiny()
    klass = root / "class"
    (klass / "late").mkdir(parents=True)
    out = root / "gradebook.csv"
    secret = klass / "carol.ipynb"
    honest, raw = honest_notebooks(ex)
    notebooks = {**honest, **mistakes(ex), **attacks(ex, secret, out), **kinds(ex)}
    for name, nb in notebooks.items():
        nbformat.write(nb, klass / f"{name}.ipynb")
    for name, content in raw.items():
        (klass / f"{name}.ipynb").write_text(json.dumps(content), encoding="utf-8")
    text = nbformat.writes(notebooks["correct"])
    (klass / "invalid_json.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")  # save cut short
    (klass / "empty.ipynb").write_bytes(b"")
    (klass / "alice-2_late.ipynb").write_bytes(b"")  # alice's or alice-2's? (invalid, and no kernel)
    (klass / "mallory_link.ipynb").symlink_to(TINY)
    roster = root / "roster.csv"  # every file's own id (alice-2_late's is ambiguous), and dora, who hands in nothing
    ids = sorted({p.stem for p in klass.iterdir() if p.suffix == ".ipynb"} - {"alice-2_late"} | {"dora"})
    roster.write_text("id,name\n" + "".join(f"{n},{n}\n" for n in ids), encoding="utf-8")
    loop = root / "loop"
    loop.mkdir()
    nbformat.write(added(notebooks["correct"], "while True:\n    pass"), loop / "infinite_loop.ipynb")
    return klass, roster, loop


def _plant_leftover(base: Path) -> Path:
    """A run folder of a grader that died, holding a tree deeper than PATH_MAX and without permissions."""
    dead = base / f"bertfamily-grade-{2**22 + 4321}-leftover"
    dead.mkdir()
    fd = os.open(dead, os.O_RDONLY)
    for _ in range(2000):
        os.mkdir("d" * 100, dir_fd=fd)
        below = os.open("d" * 100, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)
    os.chmod(dead, 0o500)
    return dead


def _shared_root(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this session shares (the session's own without xdist)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    return base.parent / f"graded-tiny-{run}" if run else base / "graded-tiny"


def _grade_the_class(root: Path) -> dict:
    klass, roster, loop = build_class(root)
    base = root / "runs"  # where the grader makes each run's folder (this class's own)
    base.mkdir()
    _plant_leftover(base)
    out, feedback = root / "gradebook.csv", root / "feedback"
    package = mounts.course_package_dir()
    before = {
        "class": digest(klass),
        "package": vandalised(package),
        "tiny": digest(TINY.parent),
        "shm": sorted(os.listdir("/dev/shm")),
        "dev": sorted(os.listdir("/dev")),
    }
    env = {**os.environ, "BERTFAMILY_GRADE_TMP": str(base), "BERTFAMILY_CANARY": CANARY}
    command = [
        sys.executable,
        "-m",
        "bertfamily.grading",
        str(klass),
        "--out",
        str(out),
        "--feedback",
        str(feedback),
        "--roster",
        str(roster),
        "--jobs",
        "2",
        "--memory-mib",
        str(MEMORY_MIB),
        "--disk-mib",
        str(DISK_MIB),
        "--cell-timeout",
        "120",
        "--timeout",
        "300",
        "--reference",
        str(TINY),
        "--sanitize",
        str(SANITIZE),
    ]
    grader = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = grader.communicate(timeout=3600)
    done = subprocess.CompletedProcess(command, grader.returncode, stdout, stderr)
    after = {
        "class": digest(klass),
        "package": vandalised(package),
        "tiny": digest(TINY.parent),
        "shm": sorted(os.listdir("/dev/shm")),
        "dev": sorted(os.listdir("/dev")),
    }
    rows = list(csv.DictReader(open(out, newline="", encoding="utf-8"))) if out.is_file() else []
    daemons = [
        " ".join(p.info["cmdline"]) for p in psutil.process_iter(["cmdline"]) if DAEMON in (p.info["cmdline"] or [])
    ]
    for p in psutil.process_iter(["cmdline"]):  # not left running when a test fails
        if DAEMON in (p.info["cmdline"] or []):
            p.kill()
    return {
        "code": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr[-5000:],
        "rows": rows,
        "feedback": {p.name: p.read_text(encoding="utf-8") for p in sorted(feedback.glob("*")) if p.name != WRITTEN},
        "before": before,
        "after": after,
        "left": sorted(p.name for p in base.iterdir()),
        "tmp_left": sorted(p.name for p in Path("/tmp").glob(f"bfg-{grader.pid}-*")),  # its fork server's folder
        "daemons": daemons,
        "class": str(klass),
        "out": str(out),
        "roster": str(roster),
        "loop": str(loop),
    }


def shared_class(tmp_path_factory) -> dict:
    """The class above, graded once for the whole session (every xdist worker reads the same result)."""
    from filelock import FileLock

    shared = _shared_root(tmp_path_factory)
    shared.mkdir(parents=True, exist_ok=True)
    result = shared / "result.json"
    with FileLock(str(shared / "lock")):
        if not result.is_file():
            root = Path(tempfile.mkdtemp(prefix="work-", dir=shared))  # a failed attempt's folder stays apart
            result.write_text(json.dumps(_grade_the_class(root)), encoding="utf-8")
    graded = json.loads(result.read_text(encoding="utf-8"))
    klass = Path(graded["class"])
    graded["by"] = {
        Path(r["submission"]).relative_to(klass).as_posix().removesuffix(".ipynb")
        if r["submission"]
        else r["student"]: r
        for r in graded["rows"]
    }
    return graded


def row(graded, name):
    return graded["by"][name]


def full(r) -> bool:
    return (r["status"], r["score"], r["max_score"]) == ("graded", str(GRADED), str(GRADED))


def grade_alone(nb, folder: Path, monkeypatch, name: str = "student.ipynb"):
    """The row of ``nb`` (a notebook of the tiny exercise) graded alone in the sandbox, as ``name`` in ``folder``
    (the runs' folders there too), in this process."""
    path = folder / name
    nbformat.write(nb, path)
    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(folder))
    limits = grading.Limits(cell_timeout=120, timeout=300, memory_mib=MEMORY_MIB)
    (row,) = grading.grade_class([path], tiny(), limits, jobs=1, progress=False)
    return row


def sanitized(text: str) -> str:
    """``text`` through the course's nbval sanitize rules (tests/sanitize.cfg), in their order, as nbval does."""
    import configparser
    import re

    rules = configparser.ConfigParser()
    rules.read(SANITIZE, encoding="utf-8")
    for section in rules.sections():
        text = re.sub(rules[section]["regex"], rules[section]["replace"], text)
    return text
