"""The grader on a small exercise made for the tests (tests/data/grading_tiny.ipynb: four graded tasks and
an ungraded timing, each run takes a kernel's start), and the nine kinds of fault of issue 38 planted.

One class is graded once per test session, through the command line, with two jobs, a roster and
feedback (:func:`graded_tiny`, shared by this file, test_gradebook.py and test_sandbox.py, and between
pytest-xdist workers through a file lock). It holds honest students (with the accidents the grader
must forgive), cheats and attacks of every kind the grader was built against, and, for each of the
nine kinds, an attack and an honest variant. Each attack must fail safe: no mark it did not earn, no
row but its own changed, nothing left behind; each honest variant keeps full marks.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from grading_class import CANARY, DISK_MIB, GRADED, MEMORY_MIB, TINY, _plant_leftover, full, row, tiny
from nbformat.v4 import new_code_cell

from bertfamily import grading
from bertfamily.grading import mounts, sandbox

pytestmark = pytest.mark.skipif(
    sandbox.sandbox_problem() is not None, reason=f"no sandbox here: {sandbox.sandbox_problem()}"
)


# ------------------------------------------------------------------ the class as a whole


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_the_class_is_graded_and_nothing_is_left_behind(graded_tiny):
    g = graded_tiny
    assert g["code"] == 0, g["stderr"]
    for part in ("class", "tiny"):
        before, after = g["before"][part], g["after"][part]
        assert sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)) == [], part
    assert g["after"]["package"] == [] and g["after"]["package"] == g["before"]["package"]
    new = set(g["after"]["shm"]) - set(g["before"]["shm"])
    assert "left-behind" not in new and all(n.startswith("sem.mp-") for n in new), new  # the grader's own locks
    assert set(g["after"]["dev"]) <= set(g["before"]["dev"]) | {"shm"}
    assert g["left"] == [], g["left"]  # every run's folder is gone, and the dead grader's leftover too
    assert g["tmp_left"] == [], g["tmp_left"]  # nor any folder of the grader's own in /tmp
    assert g["daemons"] == []
    names = {r["submission"] for r in g["rows"] if r["submission"]}
    assert len(names) == len([r for r in g["rows"] if r["submission"]])


# ------------------------------------------------------------------ the nine kinds


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind1_a_tree_of_any_shape_stays_in_its_own_row(graded_tiny):
    """A tree deeper than Python's recursion and PATH_MAX, and 20,000 files in a folder without
    permissions, in the sockets' folder and the working folder: the row is stopped and says why, the
    folder is removed, every other run is graded (a dead grader's leftover of the same shape too)."""
    r = row(graded_tiny, "kind1_tree")
    assert r["status"] == "error" and "a file tree too large" in r["detail"], r
    assert int(r["score"]) < GRADED
    assert graded_tiny["left"] == []


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind2_every_byte_counts_or_cannot_be_held(graded_tiny):
    """/dev is read-only, no nested user namespace, a file open but deleted counts, the run's own
    file system is capped: each attack is stopped or refused, and gains nothing. A root grader's socket
    folder is a 4 MiB tmpfs: the kernel refuses the deleted files there (the cell fails), else the
    watcher stops the run."""
    r = row(graded_tiny, "kind2_bytes")
    assert (
        r["status"] == "error"
        and f"out of disk: the run wrote more than {DISK_MIB} MiB" in r["detail"]
        or r["status"] == "graded"
        and "No space left on device" in r["detail"]
    ), r
    assert r["score"] == "0"
    fill = row(graded_tiny, "kind2_fill")
    assert fill["score"] == "0" and (
        fill["status"] == "error" and "out of disk" in fill["detail"] or fill["status"] == "graded"
    ), fill
    assert full(row(graded_tiny, "kinds_honest"))


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind3_code_in_magics_is_read(graded_tiny):
    r = row(graded_tiny, "kind3_magic")
    assert r["status"] == "graded" and r["task1"] == r["task2"] == r["task3"] == "0", r
    for said in (
        "`x` typed as a number",
        "`size_bytes` typed as a number",
        "`reduction` typed as a number",
        "imports ctypes",
    ):
        assert said in r["flags"], (said, r["flags"])
    unread = row(graded_tiny, "kind3_unread")
    assert full(unread) and "runs %%bash, whose code the grader does not read" in unread["flags"], unread
    honest = row(graded_tiny, "kinds_honest")
    assert full(honest) and honest["flags"] == "", honest  # %%time and %time around computed answers


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind4_the_course_does_not_answer_and_a_size_is_a_files(graded_tiny):
    r = row(graded_tiny, "kind4_course")
    assert r["status"] == "graded" and r["task2"] == "0", r
    assert "task2: `size_bytes` is not the size of a file the run wrote" in r["flags"], r["flags"]
    assert "is not the size of any file the run wrote" in r["detail"]
    assert [r["task1"], r["task3"], r["task5"]] == ["1", "1", "1"]  # no other task lost
    assert full(row(graded_tiny, "kinds_honest"))  # its file in the home folder, measured


def test_kind4_the_sandboxs_course_has_no_calculator(tmp_path):
    """In the kernel's copy of the course, the calculators of answers are not there: in their place,
    modules that raise the ImportError the student's own notebook raises (bertfamily.exercise_rules)."""
    from bertfamily import exercise_rules

    target = sandbox.kernel_package(tmp_path)
    for name in ("budget", "quantization"):
        text = (target / f"{name}.py").read_text(encoding="utf-8")
        assert text == exercise_rules.kernel_stub(f"bertfamily.{name}") and "def " not in text
    assert not (target / "sharing.py").exists()  # it imports the budget
    assert (target / "models.py").is_file() and (target / "checks.py").is_file()
    assert "expected_counts" not in (target / "checks.py").read_text(encoding="utf-8")


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind5_root_files_and_the_graders_environment_stay_out(graded_tiny):
    r = row(graded_tiny, "kind5_root")
    text = r["read_by_hand"] + "".join(graded_tiny["feedback"].values())
    assert CANARY not in text and "BERTFAMILY_GRADE_TMP" not in text
    try:
        shadow = Path("/etc/shadow").read_text().split(":")[:2]
    except OSError:  # not root here: nothing to leak
        shadow = []
    assert not shadow or ":".join(shadow) not in text
    assert "/etc/shadow: No such file or directory" in r["read_by_hand"], r["read_by_hand"]
    assert "/root: Permission denied" in r["read_by_hand"] or "/root: No such file" in r["read_by_hand"]
    if os.geteuid() == 0:  # the sandbox's user is not root outside: root's files are nobody's to it
        assert "usr owner 65534" in r["read_by_hand"], r["read_by_hand"]
    assert full(r)


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind6_a_flood_of_output_is_capped(graded_tiny):
    r = row(graded_tiny, "kind6_output")  # 135 MB of outputs: the grader kept what it scores, and graded it
    assert r["status"] == "graded" and r["score"] == "0" and r["task1"] == "0", r
    assert full(row(graded_tiny, "kinds_honest"))  # 1 MiB of output in one cell


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind6_the_grader_reads_a_run_as_a_stream(tmp_path, monkeypatch):
    """The grader's own memory while it runs and reads a run that displays 160 MiB: bounded by the
    record's cap, not by what the kernel sent."""
    import tracemalloc

    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(tmp_path))
    nb = nbformat.v4.new_notebook(
        cells=[
            new_code_cell(
                "from IPython.display import display\nblock = 'y' * 2**20\nfor _ in range(160):\n"
                "    display({'text/plain': block}, raw=True)\nprint('done')"
            )
        ]
    )
    tracemalloc.start()
    try:
        run = grading.run_sandboxed(nb, grading.Limits(cell_timeout=120, timeout=300, disk_mib=DISK_MIB), "")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 160 * 2**20, peak
    kept = sum(len(o.get("data", {}).get("text/plain", "")) for e in run["results"].values() for o in e["outputs"])
    assert kept < 2**20 and len(run["log"]) < 2**17
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind7_notebooks_jupyter_opens_are_graded(graded_tiny):
    for name, note in (
        ("kind7_v44_ids", "cell ids kept by an nbformat 4.4 notebook"),
        ("kind7_transient", "a `transient` key in an output"),
    ):
        r = row(graded_tiny, name)
        assert full(r) and r["flags"] == "", r
        assert "repaired before grading" in r["detail"] and note in r["detail"], r["detail"]


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind8_each_student_reads_their_own_feedback(graded_tiny):
    g = graded_tiny
    alice, late, alice2 = row(g, "alice"), row(g, "late/alice"), row(g, "alice-2")
    assert full(alice) and full(alice2) and late["score"] == "0"
    assert alice2["student"] == "alice-2" and alice["student"] == "alice" and late["student"] == "alice"
    ambiguous = row(g, "alice-2_late")
    assert ambiguous["student"] == "" and ambiguous["detail"].startswith(
        "ambiguous: the file name could be alice's or alice-2's"
    ), ambiguous
    names = list(g["feedback"])
    assert len(names) == len({n.casefold() for n in names}) == len([r for r in g["rows"] if r["submission"]])
    mine = [n for n in names if n.startswith("alice")]
    scores = sorted(text.split("Score: **")[1].split(" of")[0] for n, text in g["feedback"].items() if n in mine)
    assert sorted(scores) == sorted([alice["score"], late["score"], alice2["score"], "–"]), (mine, scores)
    assert g["feedback"]["alice-2.md"].count(f"Score: **{GRADED} of {GRADED}**") == 1


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind9_a_course_under_tmp_in_a_folder_with_a_space(tmp_path_factory):
    """A copy of the course and a venv made under /tmp, in a folder whose name has a space: a kernel of
    that venv starts in the sandbox and the tiny exercise gets full marks."""
    import sysconfig

    where = Path("/tmp") / f"bf clone {os.getpid()}"
    if where.exists():
        grading.trees.remove_tree(where)
    try:
        (where / "lib").mkdir(parents=True)
        import shutil

        shutil.copytree(
            mounts.course_package_dir(),
            where / "lib" / "bertfamily",
            ignore=shutil.ignore_patterns("__pycache__", "checkpoints"),
        )
        subprocess.run(
            [sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(where / ".venv")],
            check=True,
            capture_output=True,
        )
        site = next((where / ".venv" / "lib").glob("python3*/site-packages"))
        (site / "course.pth").write_text(f"{where / 'lib'}\n{sysconfig.get_paths()['purelib']}\n", encoding="utf-8")
        python = where / ".venv" / "bin" / "python"
        code = (
            "import sys; from bertfamily import grading; "
            "ex = grading.Exercise.load(sys.argv[1]); "
            "rows = grading.grade_class([sys.argv[1]], ex, grading.Limits(cell_timeout=120, timeout=300), "
            "progress=False); print(rows[0].status, rows[0].score); print(grading.__file__)"
        )
        runs = where / "runs"
        runs.mkdir()
        done = subprocess.run(
            [str(python), "-c", code, str(TINY)],
            capture_output=True,
            text=True,
            timeout=1200,
            cwd=where,
            env={**os.environ, "BERTFAMILY_GRADE_TMP": str(runs)},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        result, module = done.stdout.strip().splitlines()[-2:]
        status, score = result.split()
        assert (status, score) == ("graded", str(GRADED)) and module.startswith(str(where)), done.stdout
        assert list(runs.iterdir()) == []
    finally:
        grading.trees.remove_tree(where)


@pytest.mark.slow  # grades the shared class or starts kernels: left out by make unit
def test_kind9_a_kernel_that_cannot_start_is_said_before_anyone_is_graded(tmp_path, monkeypatch, capsys):
    """Python hidden from the sandbox: one probe run, the kernel's own error, exit code 2, no gradebook."""
    from bertfamily.grading import mounts

    monkeypatch.setattr(mounts, "python_roots", lambda hidden=None: [])
    monkeypatch.setattr(sandbox, "_PROBED", {})
    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(tmp_path))
    out = tmp_path / "gradebook.csv"
    klass = tmp_path / "class"
    klass.mkdir()
    nbformat.write(grading.model_answer(tiny().reference), klass / "a.ipynb")
    assert grading.main([str(klass), "--out", str(out), "--jobs", "1", "--reference", str(TINY)]) == 2
    err = capsys.readouterr().err
    assert "a kernel cannot start in the grader's sandbox here, so no submission was graded" in err, err
    assert "No such file or directory" in err or "execvp" in err, err  # bubblewrap's own words
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["class"]


# ------------------------------------------------------------------ the walks, by themselves


def test_trees_of_any_shape_are_measured_within_bounds_and_removed(tmp_path):
    from bertfamily.grading import trees

    top = tmp_path / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(1500):  # deeper than PATH_MAX (4096 bytes) and than Python's recursion limit
        os.mkdir("d" * 100, dir_fd=fd)
        below = os.open("d" * 100, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)
    (top / "wide").mkdir()
    for n in range(3000):
        (top / "wide" / str(n)).write_bytes(b"x")
    os.chmod(top / "wide", 0)
    with pytest.raises(trees.TooLarge, match="nested more than"):
        trees.measure(top)
    with pytest.raises(trees.TooLarge, match="more than 1,000 files"):
        trees.measure(top, max_entries=1000, max_depth=10_000)
    assert trees.remove_tree(top) == "" and list(tmp_path.iterdir()) == []
    assert trees.remove_tree(tmp_path / "absent") == ""


def test_a_later_run_never_fails_on_an_earlier_runs_leftovers(tmp_path):
    from bertfamily.grading import trees

    dead = _plant_leftover(tmp_path)
    live = tmp_path / f"bertfamily-grade-{os.getpid()}-mine"
    live.mkdir()
    sandbox.sweep_leftovers(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name] and not dead.exists()
    trees.remove_tree(live)


def test_record_and_log_are_bounded():
    from bertfamily.grading import nbval_worker

    big = [{"output_type": "stream", "name": "stdout", "text": "z" * 2**20} for _ in range(50)]
    answers = [
        {"output_type": "display_data", "data": {grading.channel.ANSWERS_MIME: {"cell": "c", "answers": "{}"}}}
        for _ in range(5)
    ]
    kept = nbval_worker._plain(big + answers)
    assert sum(len(o.get("text", "")) for o in kept) <= nbval_worker.CELL_TEXT + nbval_worker.MAX_TEXT
    assert sum(grading.channel.ANSWERS_MIME in o.get("data", {}) for o in kept) == nbval_worker.ANSWERS_KEPT + 1
    essentials = nbval_worker._plain(big + [{"output_type": "error", "ename": "E", "evalue": "v" * 5000}], True)
    assert [o["output_type"] for o in essentials] == ["error", "stream"] and len(essentials[0]["evalue"]) < 1100


def test_magics_are_read_as_the_code_they_run():
    from bertfamily.grading import magics

    tree, unread = magics.read_cell("%%capture out\n%%time\nimport ctypes\nz = 5\n")
    assert unread == [] and "import ctypes" in "\n".join(map(__import__("ast").unparse, tree.body))
    assert magics.read_cell("%timeit -n 1 -r 3 y = f(2)")[0].body[-1].targets[0].id == "y"
    assert magics.read_cell("%%bash\necho hi")[1] == ["%%bash"]
    assert magics.read_cell("%%writefile x.py\nprint(1)")[1] == ["%%writefile"]
    assert magics.read_cell("%matplotlib inline\nw = 1")[1] == []


def test_feedback_names_are_unique_and_attribution_is_never_guessed():
    from bertfamily.grading.gradebook import attribution, feedback_names

    rows = [
        grading.Row(n, "graded", 1, 1, {}, "")
        for n in ("c/alice.ipynb", "late/alice.ipynb", "c/alice-2.ipynb", "c/Bob.ipynb", "c/bob.ipynb")
    ]
    spoof = "c/alice-" + hashlib.sha256(b"c/alice.ipynb").hexdigest()[:8] + ".ipynb"
    names = feedback_names([*rows, grading.Row(spoof, "graded", 1, 1, {}, "")])
    assert len({n.casefold() for n in names}) == 6 and "alice-2.md" in names
    roster = {"alice": {}, "alice-2": {}}
    assert attribution("alice-2.ipynb", grading.gradebook.ID_PATTERN, roster) == ("alice-2", "")
    assert attribution("alice_late.ipynb", grading.gradebook.ID_PATTERN, roster) == ("alice", "")
    assert attribution("alice-2_late.ipynb", grading.gradebook.ID_PATTERN, roster)[0] == ""


def test_a_notebook_is_repaired_before_it_is_validated():
    ex = tiny()
    content = json.loads(nbformat.writes(ex.reference))
    content["nbformat_minor"] = 3
    content["cells"][1]["outputs"][0]["transient"] = {}
    content["cells"][1]["bogus"] = 1
    content["cells"][3]["id"] = content["cells"][1]["id"]  # a repeated id
    repairs = []
    nb = grading.read_submission(json.dumps(content).encode(), ex.tasks, ex.name, repairs)
    assert nb.nbformat_minor == 5 and len({c.id for c in nb.cells}) == len(nb.cells)
    assert "nbformat 4.3" in repairs[0] and "`transient`" in repairs[0] and "`bogus`" in repairs[0], repairs


def test_a_delegated_cgroup_v2_tree_is_found_and_nothing_else(tmp_path):
    """Where the grader's own group's parent enables memory and pids for its children and may be
    written to, each run gets a group there; cgroup v1, or a tree not delegated, gives none."""
    from bertfamily.grading import cgroups

    proc = tmp_path / "cgroup"
    proc.write_text("0::/grading/grader\n", encoding="utf-8")
    root = tmp_path / "fs"
    (root / "grading" / "grader").mkdir(parents=True)
    (root / "grading" / "cgroup.procs").write_text("")
    assert cgroups.delegated(root, str(proc)) is None  # not cgroup v2 (no cgroup.controllers)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (root / "grading" / "cgroup.subtree_control").write_text("cpu\n")
    assert cgroups.delegated.__wrapped__(root, str(proc)) is None  # memory and pids not delegated
    (root / "grading" / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert cgroups.delegated.__wrapped__(root, str(proc)) == root / "grading"
    group = cgroups.RunGroup(root / "grading", 3 * 2**30, 256)
    assert (group.path / "memory.max").read_text() == f"{3 * 2**30}\n"
    assert (group.path / "pids.max").read_text() == "256\n"
    assert not group.out_of_memory()
    for f in group.path.iterdir():  # a real cgroup's files go with the folder; a fake one's do not
        f.unlink()
    group.close()
    assert not group.path.exists()


@pytest.mark.slow  # starts kernels: left out by make unit
def test_kind9_a_course_only_pythonpath_names_is_the_kernels_or_said_before_anyone_is_graded(tmp_path, monkeypatch):
    """The grader imported the course from a folder that only its ``PYTHONPATH`` names (a checkout run as
    ``PYTHONPATH=lib python -m bertfamily.grading``, installed nowhere or from another checkout). The
    sandbox empties the kernel's environment: the kernel is given that folder, where the run's copy is
    bound, and imports it. Without it, the probe stops the class and says why, instead of a gradebook
    of zeros with ``No module named 'bertfamily'`` in every row."""
    elsewhere = tmp_path / "checkout" / "lib"
    elsewhere.mkdir(parents=True)
    bwrap_args = mounts.bwrap_args
    monkeypatch.setattr(
        mounts,
        "bwrap_args",
        lambda folder, runtime, limits, submitted, roots, package: bwrap_args(
            folder, runtime, limits, submitted, roots, elsewhere / "bertfamily"
        ),
    )
    monkeypatch.setenv("BERTFAMILY_GRADE_TMP", str(tmp_path))
    limits = sandbox.Limits(memory_mib=MEMORY_MIB, disk_mib=64)
    monkeypatch.setattr(sandbox, "_PROBED", {})
    monkeypatch.setenv("PYTHONPATH", str(elsewhere))
    sandbox.probe_kernel(limits)  # the kernel imported the copy bound in the folder PYTHONPATH names
    monkeypatch.setattr(sandbox, "_PROBED", {})
    monkeypatch.delenv("PYTHONPATH")
    with pytest.raises(
        sandbox.SandboxMissing,
        match=r"cannot import the course package, `bertfamily` "
        r"\(No module named 'bertfamily'\).*pip install -e \.",
    ):
        sandbox.probe_kernel(limits)
