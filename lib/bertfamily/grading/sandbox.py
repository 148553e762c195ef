"""One run of a submission: nbval outside, the student's kernel sealed in a bubblewrap sandbox.

The grader's nbval worker (:mod:`~bertfamily.grading.nbval_worker`) runs as the instructor in a
private folder of the run; only the kernel, the student's code, runs inside ``bwrap`` (Debian's
``bubblewrap``, the sandbox Flatpak is built on), with the walls :mod:`~bertfamily.grading.mounts`
builds: its own namespaces, an unprivileged user, a size-capped file system of its own, read-only
views of the system, Python and a copy of the course without answer key or calculators.

* The kernel talks to nbval over ZeroMQ's ``ipc`` transport (Unix sockets in a folder both see), so
  the answers it sends reach the grader the moment the check cell runs; no file the kernel can write
  is read back.
* Limits (:mod:`~bertfamily.grading.monitor`): the kernel caps the run's files, the watcher samples
  memory, processes, CPU, time and the few bytes the run can still add to the grader's own disk.
* The run's folder is deleted afterwards, whatever the kernel left in it
  (:func:`~bertfamily.grading.trees.remove_tree`); a folder a killed grader left is swept by the next
  run, and no failure there reaches another run.
* Before a class is graded, one probe run checks that a kernel starts here (:func:`probe_kernel`):
  if not, the grader says why, with the kernel's own error, and grades nobody.

Before each graded check cell the grader's exporter (:mod:`~bertfamily.grading.channel`) sends the
values the check reads to nbval as one display message, for the grader to check again in its own
process.
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from bertfamily.grading import cgroups, cgroupv1, trees
from bertfamily.grading.channel import EXPORTER, with_exports
from bertfamily.grading.hub import write_served_hub
from bertfamily.grading.monitor import (
    MAX_FILE_BYTES,
    Limits,
    LogTail,
    child_limits,
    kill_tree,
    out_of_memory,
    watch,
    writable_folders,
)
from bertfamily.grading.mounts import (
    EXPORTER_INSIDE,
    HUB,
    UNSAFE_FLAG,
    SandboxMissing,
    bwrap_options,
    bwrap_path,
    course_package_dir,
    kernel_package,
    kernel_pythonpath,
    launch_command,
    namespaces,
    outer_ids,
    sandbox_env,
    write_launch,
)
from bertfamily.grading.nbval_worker import FULL, RECORD_MAX, WORKER_COMMAND, records
from bertfamily.grading.standins import KERNEL, STANDINS, write_standins
from bertfamily.grading.textsafe import disk_name

#: A Unix socket's path holds at most 107 bytes: the kernel's sockets need a folder with a short path.
MAX_RUNTIME_PATH = 80


def _drop(ids):
    """Before bubblewrap starts: leave root for the sandbox's unprivileged outer user."""
    def apply():  # pragma: no cover - runs in the child before exec
        if ids:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
    return apply


@functools.cache
def sandbox_problem() -> str | None:
    """Why a sandbox cannot be made here (None: it can). Tries bubblewrap's namespaces once, as the
    sandbox will run (an unprivileged user when the grader is root)."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox (bubblewrap) needs Linux; this is {sys.platform}"
    bwrap = bwrap_path()
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    if "--size" not in bwrap_options():
        return ("this bubblewrap is older than 0.5: it cannot cap the sandbox's files (--size); install "
                "bubblewrap 0.5 or later (0.8 or later also forbids nested user namespaces)")
    ids = outer_ids()
    probe = [bwrap, *namespaces(), "--size", str(2**20), "--tmpfs", "/", "--ro-bind", "/usr", "/usr"]
    for system in ("/bin", "/lib", "/lib64"):
        probe += ["--ro-bind-try", system, system]
    probe += ["--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, env={}, preexec_fn=_drop(ids))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not run: {exc}"
    if done.returncode != 0:
        who = f" as the unprivileged user {ids[0]} (the grader runs as root)" if ids else ""
        return (f"bubblewrap cannot create user, PID and network namespaces here{who} "
                f"({done.stderr.strip() or done.returncode}): enable unprivileged user namespaces "
                "or grade in a Linux container that allows them")
    return None


def require_sandbox() -> None:
    problem = sandbox_problem()
    if problem:
        raise SandboxMissing(f"{problem}. The grader runs students' code only in the sandbox; to run it "
                             f"unsandboxed, as you, with your files and network, pass {UNSAFE_FLAG}")


def run_base() -> str:
    """Where the runs' folders go: ``/var/tmp``, or the temporary folder."""
    base = os.environ.get("BERTFAMILY_GRADE_TMP") or "/var/tmp"
    return base if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK) else tempfile.gettempdir()


#: The private copy a cluster's worker grades a submission from (:func:`~bertfamily.grading.cluster.grade_bytes`),
#: in the temporary folder: ``COPY_PREFIX`` + the worker's process id + ``-``.
COPY_PREFIX = "bertfamily-submission-"


def sweep_leftovers(base) -> None:
    """Remove the run folders of graders that are gone (a grading worker killed mid-run cannot clean up
    after itself), and the copies of submissions they graded from: each folder's name holds the process id
    of the grader that made it. Whatever such a folder holds, and whether or not it can be removed,
    nothing here fails the run that sweeps. Then the cgroups of graders killed mid-run."""
    places = ((Path(base), "bertfamily-grade-"), (Path("/tmp"), "bfg-"), (Path("/var/tmp"), "bfg-"),
              (Path(tempfile.gettempdir()), COPY_PREFIX))
    for where, prefix in places:
        try:
            entries = [e for e in os.scandir(where) if e.name.startswith(prefix)]
        except OSError:
            continue
        for entry in entries:
            found = re.match(rf"{prefix}(\d+)-", entry.name)
            try:
                if not found or not entry.is_dir(follow_symlinks=False):
                    continue
                os.kill(int(found.group(1)), 0)
            except ProcessLookupError:
                for point in _mounts_under(entry.path):
                    uncap_runtime(Path(point))
                trees.remove_tree(entry.path)
            except (OSError, OverflowError, ValueError):
                pass
    cgroupv1.sweep()


def _runtime(folder: Path) -> Path:
    """The folder of the kernel's sockets and connection file, seen at the same path on both sides: the
    run's ``runtime/`` when its path is short enough for a socket, otherwise a private folder in /tmp."""
    inside = folder / "runtime"
    if len(str(inside)) <= MAX_RUNTIME_PATH:
        inside.mkdir()
        return inside
    return Path(tempfile.mkdtemp(prefix=f"bfg-{os.getpid()}-", dir="/tmp" if os.path.isdir("/tmp") else None))


#: The size of the tmpfs a root grader mounts on the socket folder (sockets take no room; the
#: connection file a few hundred bytes): the only folder on the grader's side the kernel can write.
RUNTIME_TMPFS = 4 * 2**20


def _libc():
    import ctypes
    return ctypes.CDLL(None, use_errno=True)


def cap_runtime(runtime: Path) -> bool:
    """Mount a small tmpfs on the socket folder (a root grader on Linux): what the kernel writes there
    is held by its size, and by the run's memory cgroup, which is charged for its pages; nothing
    reaches the grader's disk. False where it cannot (then the watcher samples the folder)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    flags = 0x2 | 0x4 | 0x8  # MS_NOSUID | MS_NODEV | MS_NOEXEC
    options = f"size={RUNTIME_TMPFS},mode=0700".encode()
    return _libc().mount(b"tmpfs", str(runtime).encode(), b"tmpfs", flags, options) == 0


def uncap_runtime(runtime: Path) -> None:
    """Unmount a socket folder's tmpfs (lazily: a process of the run may still hold it); never raises."""
    try:
        _libc().umount2(str(runtime).encode(), 2)  # MNT_DETACH
    except (OSError, AttributeError):
        pass


def _mounts_under(path: str) -> list[str]:
    """The mount points at or under ``path`` (a killed grader's socket folders)."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            points = [line.split()[1] for line in mounts if len(line.split()) > 1]
    except OSError:
        return []
    return [p for p in points if p == path or p.startswith(path.rstrip("/") + "/")]


def _file_name(name: str) -> str:
    """The name the kernel sees its submitted file under: the submission's own where any file system
    takes it, else a short, plain one with a digest (:func:`~bertfamily.grading.textsafe.disk_name`)."""
    name = Path(str(name)).name
    if name in ("", ".", ".."):
        return "submission.ipynb"
    ipynb = name.endswith(".ipynb")
    return disk_name(name.removesuffix(".ipynb") if ipynb else name, ".ipynb" if ipynb else "")


def run_sandboxed(nb, limits: Limits, sanitize: str, exports: dict | None = None,
                  submitted: bytes | None = None, name: str = "submission.ipynb", *,
                  hidden: Path | None = None) -> dict:
    """Run ``nb`` under nbval, its kernel in the sandbox; return what happened, cell by cell.

    The run's folder (private to the grader) holds nbval's copy of the notebook, the student's file
    (``submitted``, without its outputs: seen by the kernel read-only as ``name`` in its working folder), the kernel's
    sockets, and the grader's exporter and copy of the course; the whole folder is deleted afterwards.
    ``exports`` maps a check cell's id to the names its check reads: the exporter sends them just
    before that cell's check runs. Returns ``{"status": "" | "timeout" | "error", "reason", "cell"
    (the code-cell number running when the run was stopped), "results" (per code-cell number),
    "exit_code", "log" (its last bytes), "peak_mib", "cpu_s", "wall_s"}``; the answers are in the check
    cells' outputs, and each cell's result lists the sizes of the files the run then held (``sizes``).
    ``hidden``: a folder the kernel must not see (the reference's, :attr:`Exercise.folder
    <bertfamily.grading.exercise.Exercise.folder>`): no folder that holds it is mounted.
    """
    if limits.sandbox:
        require_sandbox()
    sweep_leftovers(run_base())
    folder = Path(tempfile.mkdtemp(prefix=f"bertfamily-grade-{os.getpid()}-", dir=run_base()))
    proc = runtime = view = group = None
    capped = False
    try:
        for sub in ("nb", "grader", "submitted", "worker", "worker/home", "worker/tmp"):
            (folder / sub).mkdir(mode=0o700)
        (folder / "grader" / "export.py").write_text(EXPORTER, encoding="utf-8")
        write_served_hub(folder / HUB)
        write_standins(folder / STANDINS)  # google.colab, for a notebook written on Colab
        kernel_package(folder / "course")
        name = _file_name(name)
        data = submitted if submitted is not None else nbformat.writes(nb).encode("utf-8")
        (folder / "submitted" / name).write_bytes(data)
        if not limits.sandbox:
            for sub in ("home", "tmp", "work", "shm"):
                (folder / sub).mkdir()
            (folder / "work" / name).write_bytes(data)
        exporter = EXPORTER_INSIDE if limits.sandbox else folder / "grader" / "export.py"
        nb = with_exports(nb, exports or {}, exporter)
        notebook, record = folder / "nb" / "submission.ipynb", folder / "record.jsonl"
        nbformat.write(nb, notebook)
        (folder / "sanitize.cfg").write_text(sanitize, encoding="utf-8")
        (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        runtime = _runtime(folder)
        capped = cap_runtime(runtime)
        ids = outer_ids() if limits.sandbox else None
        if ids:  # the kernel, an unprivileged user outside, makes its sockets there
            os.chown(runtime, *ids)
        if limits.sandbox:
            launch, view = write_launch(folder, runtime, limits, name, hidden)
            argv, kernel_env = launch_command(launch), {}
        else:  # the kernel still imports the run's copy of the package (no answer key there)
            argv = [sys.executable, "-m", KERNEL, "-f", "{connection_file}"]
            kernel_env = {"PYTHONPATH": os.pathsep.join([str(folder / "course"), str(folder / STANDINS)])}
        (folder / "kernel.json").write_text(json.dumps({"argv": argv, "env": kernel_env}), encoding="utf-8")
        env = sandbox_env(folder if not limits.sandbox else folder / "worker", limits.threads)
        if (path := kernel_pythonpath(course_package_dir())):  # the worker runs this grader's nbval_worker
            env["PYTHONPATH"] = path
        env["JUPYTER_RUNTIME_DIR"] = str(runtime)
        sizes_from = "sandbox" if limits.sandbox else [str(folder / s) for s in ("home", "tmp", "work", "shm")]
        cmd = [sys.executable, "-c", WORKER_COMMAND, str(record), str(notebook), str(limits.cell_timeout),
               str(folder / "sanitize.cfg"), str(folder / "pytest.ini"), str(folder / "kernel.json"),
               json.dumps(sizes_from)]
        file_bytes = min(MAX_FILE_BYTES, limits.disk_mib * 2**20)
        group = cgroups.run_group(limits)  # the kernel's own limits: cgroup v2 where delegated, else v1
        proc = subprocess.Popen(cmd, cwd=folder / "nb", env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=child_limits(file_bytes, group))
        tail = LogTail(proc.stdout)
        peak, cpu, began = [0], [0.0], time.monotonic()
        try:
            status, reason, cell = watch(proc, record, limits, peak,
                                         writable_folders(folder, runtime, limits.sandbox), cpu, group, capped)
        finally:
            kill_tree(proc.pid)
            proc.wait()
        log = tail.text()
        if proc.stdout is not None:  # always a pipe here (the tail read it)
            proc.stdout.close()
        _, results, full = records(record)
        if full and not status:
            status, reason = "error", f"too much output: {FULL} ({RECORD_MAX // 2**20} MiB)"
        if group is not None and group.out_of_memory() and status != "timeout":
            status, reason = "error", out_of_memory(limits, group)
        elif group is not None and group.tasks_refused() and not status:
            status, reason = "error", (f"too many processes: the run tried to start more than {limits.processes} "
                                       f"processes and threads (tasks: held by {group.kind} {group.tasks_file})")
    finally:
        if proc is not None and proc.poll() is None:
            kill_tree(proc.pid)
        if group is not None:
            group.close()
        if capped and runtime is not None:
            uncap_runtime(runtime)
        for outside in (runtime, view):
            if outside is not None and not outside.is_relative_to(folder):
                trees.remove_tree(outside)
        trees.remove_tree(folder)
    return {"status": status, "reason": reason, "cell": cell, "results": results, "exit_code": proc.returncode,
            "log": log, "peak_mib": peak[0] / 2**20, "cpu_s": cpu[0], "wall_s": time.monotonic() - began}


_PROBED: dict = {}


def _kernel_said(log: str) -> list[str]:
    """The lines of a run's log that say why its kernel did not start (bubblewrap's own, and the errors
    Python printed), else its last lines."""
    lines = [line.rstrip() for line in log.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("bwrap:") or (
        re.match(r"[A-Za-z_][\w.]*(Error|Exception): ", line) and "Kernel died before replying" not in line)]
    return list(dict.fromkeys(said))[-15:] or lines[-15:] or ["(nothing)"]


def probe_kernel(limits: Limits) -> None:
    """Start one kernel the way the class's will start (a notebook of one cell), once per process;
    :class:`SandboxMissing` with the kernel's own error when it cannot, before anyone is graded."""
    key = limits.sandbox
    if key not in _PROBED:
        cell = nbformat.v4.new_code_cell("import sys\nimport bertfamily.checks\nprint('ready', sys.version_info[0])")
        probe = nbformat.v4.new_notebook(cells=[cell])
        small = Limits(cell_timeout=max(limits.cell_timeout, 60), timeout=max(limits.timeout, 120),
                       memory_mib=limits.memory_mib, threads=1, disk_mib=min(limits.disk_mib, 256),
                       processes=limits.processes, sandbox=limits.sandbox, cpu_factor=100.0)
        try:
            run = run_sandboxed(probe, small, "")
        except SandboxMissing:
            raise
        except Exception as exc:  # the run itself could not be set up here
            _PROBED[key] = f"{type(exc).__name__}: {exc}"
        else:
            result = run["results"].get(0, {})
            printed = "".join(o.get("text", "") for o in result.get("outputs", []))
            said = run["log"] + str(result.get("message") or "")
            if not run["status"] and "No module named 'bertfamily'" in said:
                _PROBED[key] = (f"its kernel cannot import the course package, `bertfamily` (No module named "
                                f"'bertfamily'): this grader imported it from {course_package_dir()}, which this "
                                f"Python ({sys.executable}) does not install; install the course into it "
                                "(`pip install -e .` in the checkout) or run the grader from its `.venv`")
            elif run["status"] or result.get("outcome") != "passed" or "ready" not in printed:
                why = run["reason"] or result.get("message") or f"the worker ended with code {run['exit_code']}"
                _PROBED[key] = f"{why}; what the kernel said:\n    " + "\n    ".join(_kernel_said(run["log"]))
            else:
                _PROBED[key] = None
    if _PROBED[key]:
        raise SandboxMissing("a kernel cannot start in the grader's sandbox here, so no submission was graded: "
                             f"{_PROBED[key]}")
