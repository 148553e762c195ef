"""One run of a submission: nbval outside, the student's kernel sealed in a bubblewrap sandbox.

The grader's nbval worker runs as the instructor in a private temporary folder; only the kernel, the
student's code, runs inside ``bwrap`` (Debian's ``bubblewrap``, the sandbox Flatpak is built on):

* new user, PID, network, IPC, UTS and cgroup namespaces: an unprivileged user without capabilities,
  no network (loopback only), no view of any process outside the run, and every process the kernel
  starts, daemons included, is killed when the kernel ends (the namespace's first process dies);
* a file system of read-only views: the system, Python, the course package (with the answer key
  taken out, :func:`kernel_package`) and the grader's exporter; writable: the run's own home (with a
  copy of the submission as handed in), ``/tmp`` and ``/dev/shm``, all inside the run's folder, which
  is deleted afterwards. The reference solution, other submissions, other runs, the instructor's
  home and the grader's arguments are not in the sandbox at all;
* the kernel talks to nbval over ZeroMQ's ``ipc`` transport (Unix sockets in a folder both see), so
  the answers it sends reach the grader the moment the check cell runs; no file the kernel can
  write is read back;
* limits: the watcher sums the memory of every process of the run (the namespace keeps them all in
  one tree), counts them, measures the run's disk and kills the run past the time, memory, process
  or disk limit; core dumps are off and a single file is capped.

Outputs that depend on where the student ran (:func:`place_independent`) are not compared. Before each
graded check cell the grader's exporter (:mod:`bertfamily.grading.verify`) sends the values the check
reads to nbval as one display message, for the grader to check again in its own process.
"""
from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from bertfamily import kernels
from bertfamily.grading.marks import _output_text

OUTPUT_TIMEOUT_S = 60  # nbval's wait for a finished cell's output messages (as the root conftest.py)
POLL_S = 0.1
DISK_POLL_S = 1.0
#: CPU seconds a run may use beyond ``Limits.cpu_factor`` times its share of cores (its torch threads)
#: before it is stopped for taking a classmate's CPU (spinning processes left behind, say).
CPU_GRACE_S = 10.0
_KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ")
#: The MIME type of the grader's exporter's one message per check cell (never shown by a front end).
ANSWERS_MIME = "application/vnd.bertfamily.answers+json"
#: Where the run's folder appears inside the sandbox, and the grader's exporter (read-only).
INSIDE = Path("/sandbox")
EXPORTER_INSIDE = "/grader/export.py"
MAX_FILE_BYTES = 4 * 2**30  # RLIMIT_FSIZE: one file written by the kernel
UNSAFE_FLAG = "--unsafe-no-sandbox"


class SandboxMissing(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here: untrusted code must not run."""


@dataclass(frozen=True)
class Limits:
    """Time (seconds), memory and disk (MiB) and process limits of one run; ``sandbox=False`` only
    with the instructor's explicit ``--unsafe-no-sandbox``."""
    cell_timeout: float = 120
    timeout: float = 900
    memory_mib: int = 4096
    threads: int | None = None  # torch threads per kernel; None: the pinned default (kernels.PINNED)
    disk_mib: int = 4096
    processes: int = 256
    sandbox: bool = True
    cpu_factor: float = 1.5  # CPU a run may use: this times its share of cores (its threads), after a grace


def sandbox_env(folder, threads: int | None = None) -> dict:
    """The environment of a kernel: PATH and locale only, offline, HOME and caches inside ``folder``.

    Nothing else of the instructor's environment passes (no tokens, keys, credentials, proxies).
    The numerical kernels are pinned as for the committed outputs (:mod:`bertfamily.kernels`), with
    ``threads`` torch threads (the grader gives each of its jobs cores / jobs). In the sandbox
    ``folder`` is :data:`INSIDE`, the run's folder as the kernel sees it.
    """
    folder = Path(folder)
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV or k.startswith("LC_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    for name, sub in (("HOME", "home"), ("TMPDIR", "tmp"), ("IPYTHONDIR", "home/.ipython"),
                      ("JUPYTER_CONFIG_DIR", "home/.jupyter"), ("JUPYTER_DATA_DIR", "home/.jupyter-data"),
                      ("JUPYTER_RUNTIME_DIR", "home/.jupyter-runtime"), ("MPLCONFIGDIR", "home/.matplotlib"),
                      ("HF_HOME", "home/.cache/huggingface")):
        env[name] = str(folder / sub)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1",
               JUPYTER_PLATFORM_DIRS="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    switch = {k: v for k, v in os.environ.items() if k == kernels.SWITCH}  # only the documented switch passes
    env.update(kernels.pinned_environ(switch, threads, shared_cores=True))
    return env


# --- the sandbox: bubblewrap, and the course package as the kernel sees it

def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=None)
def sandbox_problem() -> str | None:
    """Why a sandbox cannot be made here (None: it can). Tries bubblewrap's namespaces once."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox (bubblewrap) needs Linux; this is {sys.platform}"
    bwrap = bwrap_path()
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    probe = [bwrap, *_NAMESPACES, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not run: {exc}"
    if done.returncode != 0:
        return ("bubblewrap cannot create user, PID and network namespaces here "
                f"({done.stderr.strip() or done.returncode}): enable unprivileged user namespaces "
                "or grade in a Linux container that allows them")
    return None


def require_sandbox() -> None:
    problem = sandbox_problem()
    if problem:
        raise SandboxMissing(f"{problem}. The grader runs students' code only in the sandbox; to run it "
                             f"unsandboxed, as you, with your files and network, pass {UNSAFE_FLAG}")


_NAMESPACES = ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
               "--die-with-parent", "--new-session", "--cap-drop", "ALL")

#: What the kernel's copy of the course package leaves out: the grader (which knows the reference) and
#: compiled files; its ``checks.py`` is :func:`kernel_checks_source`, without the expected values.
HIDDEN = ("grading", "__pycache__")


def package_dir() -> Path:
    import bertfamily
    return Path(bertfamily.__file__).resolve().parent


def _python_roots() -> list[Path]:
    """Folders the kernel's Python needs, read-only: the interpreter's prefixes and the site-packages
    folders on sys.path, but never a folder that holds the course's repository (its ``book/`` has the
    reference solution); the package itself is replaced by the run's copy (:func:`kernel_package`)."""
    from bertfamily.grading.exercise import ROOT

    secret = ROOT / "book"
    roots = []
    candidates = [sys.base_prefix, sys.prefix, sys.exec_prefix]
    candidates += [p for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")]
    for entry in candidates:
        path = Path(entry).resolve()
        if not path.is_dir() or (secret.is_dir() and secret.resolve().is_relative_to(path)) \
                or any(path.is_relative_to(r) for r in roots):
            continue
        roots = [r for r in roots if not r.is_relative_to(path)] + [path]
    return roots


KERNEL_CHECKS = '''"""bertfamily.checks while a submission is graded: the grader checks every answer outside the
kernel, and the answer key (the checks' expected values) stays with the grader."""

{constants}


def _checked_outside(name):
    def check(*args, **kwargs):
        print(f"· {{name}}: checked by the grader, outside the notebook")
    check.__name__ = name
    return check


for _name in {names!r}:
    globals()[_name] = _checked_outside(_name)


def for_the_instructor(text):
    print("· read by your instructor, not scored")


def __getattr__(name):
    raise AttributeError(f"bertfamily.checks.{{name}} is the answer key: it stays with the grader while "
                         "a submission is graded (compute the answer in your own code)")
'''


def kernel_checks_source() -> str:
    """The ``checks`` module the kernel imports while graded: every check function, printing only that
    the grader checks it; every other name raises, saying the answer key is not in the sandbox."""
    from bertfamily import checks

    names = sorted(n for n in vars(checks) if n.startswith("check_") and callable(getattr(checks, n)))
    constants = "\n".join(f"{n} = {v!r}" for n, v in vars(checks).items()
                          if n.isupper() and isinstance(v, (str, int, float)) and not n.startswith("_"))
    return KERNEL_CHECKS.format(constants=constants, names=names)


def kernel_package(dest: Path) -> Path:
    """The course package as the kernel sees it, copied into ``dest``: as installed now, without the
    grader, and with the kernel's ``checks`` (no answer key). Read-only in the sandbox; one per run,
    so nothing an instructor changes mid-class, and nothing a run does, reaches another run."""
    source, target = package_dir(), Path(dest) / "bertfamily"
    shutil.copytree(source, target, ignore=lambda top, names: [
        n for n in names if n in HIDDEN and Path(top) == source or n == "__pycache__"])
    (target / "checks.py").write_text(kernel_checks_source(), encoding="utf-8")
    return target


def _bwrap_args(folder: Path, runtime: Path, threads: int | None) -> list[str]:
    """bubblewrap's arguments for one run (everything up to the command)."""
    args = [*_NAMESPACES, "--clearenv", "--proc", "/proc", "--dev", "/dev"]
    for system in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/sys/devices/system/cpu"):
        args += ["--ro-bind-try", system, system]
    for root in _python_roots():
        args += ["--ro-bind", str(root), str(root)]
    package = package_dir()  # the run's copy, where Python finds the package (over site-packages too)
    args += ["--ro-bind", str(folder / "course" / "bertfamily"), str(package)]
    for sub in ("home", "tmp", "work", "shm"):
        args += ["--bind", str(folder / sub), str(INSIDE / sub)]
    args += ["--bind", str(folder / "tmp"), "/tmp", "--bind", str(folder / "shm"), "/dev/shm",
             "--ro-bind", str(folder / "grader" / "export.py"), EXPORTER_INSIDE,
             "--bind", str(runtime), str(runtime), "--chdir", str(INSIDE / "work"),
             "--remount-ro", "/"]  # the sandbox's own root (a tmpfs) is read-only too: no file in memory
    for key, value in sandbox_env(INSIDE, threads).items():
        args += ["--setenv", key, value]
    return args


def kernel_argv(folder: Path, runtime: Path, limits: Limits) -> list[str]:
    """The kernel's command line (a kernelspec's argv): ipykernel inside bubblewrap, or bare when
    the instructor asked for no sandbox."""
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    if not limits.sandbox:
        return kernel
    return [bwrap_path(), *_bwrap_args(folder, runtime, limits.threads), "--", *kernel]


# --- the worker: pytest with nbval, as the grader, outside the sandbox; one JSON line per cell

_WORKER = "import sys; from bertfamily.grading.sandbox import _nbval_worker; sys.exit(_nbval_worker(sys.argv[1:]))"


MAX_TEXT = 100_000  # characters of one output the grader keeps (what scoring reads is a few lines)


def _cut(text) -> str:
    text = text if isinstance(text, str) else "".join(text) if isinstance(text, list) else str(text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"\n[... {len(text) - MAX_TEXT:,} characters cut]\n"


def _plain(outputs) -> list:
    """Outputs reduced to what scoring needs (streams, text/plain, errors, the grader's answers), each
    text cut to :data:`MAX_TEXT` characters."""
    plain = []
    for out in (outputs or [])[:1000]:
        kind = out.get("output_type")
        if kind == "stream":
            plain.append({"output_type": kind, "name": out.get("name"), "text": _cut(out.get("text", ""))})
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            entry = {"output_type": kind, "data": {"text/plain": _cut(data.get("text/plain", ""))}}
            if ANSWERS_MIME in data:
                entry["data"][ANSWERS_MIME] = data[ANSWERS_MIME]
            plain.append(entry)
        elif kind == "error":
            plain.append({"output_type": kind, "ename": _cut(out.get("ename")), "evalue": _cut(out.get("evalue"))})
    return plain


def _first_difference(item) -> tuple[str, str]:
    """The first line (sanitized) where a cell's stored output and its re-run output differ."""
    from itertools import zip_longest

    from nbval.plugin import coalesce_streams

    def lines(outputs):
        return item.sanitize(_output_text(nbformat.from_dict({"outputs": coalesce_streams(
            [nbformat.from_dict(copy.deepcopy(dict(o))) for o in outputs])}))).splitlines()
    for stored, rerun in zip_longest(lines(place_independent(item.cell.outputs)),
                                     lines(place_independent(item.test_outputs or [])),
                                     fillvalue="(nothing)"):
        if stored != rerun:
            return stored[:100], rerun[:100]
    return "(an output that is not text)", "(a different one)"


_WIDGET = "application/vnd.jupyter.widget-view+json"


def place_independent(outputs) -> list:
    """A cell's outputs without those that depend on where it ran, which the grader does not compare.

    Dropped: stderr (warnings, hub download lines, transformers' load reports, version banners),
    widget displays (progress bars such as "Loading weights") and the grader's own answers message.
    What a task computes is printed to stdout or displayed as data, and that is still compared.
    """
    return [o for o in outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
            and _WIDGET not in (o.get("data") or {}) and ANSWERS_MIME not in (o.get("data") or {})]


def _place_independent_compare(original):
    def compare_outputs(test, ref, skip_compare=None):
        return original(place_independent(test), place_independent(ref), skip_compare)
    return compare_outputs


def _use_kernel(spec: dict) -> None:
    """nbval starts its kernels from ``argv`` and talks to them over Unix sockets (ZeroMQ ``ipc``):
    a kernel in its own network namespace has no TCP path to the grader."""
    import nbval.kernel
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager

    runtime = Path(os.environ["JUPYTER_RUNTIME_DIR"])  # the run's folder both sides see

    class SandboxKernelManager(KernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=str(runtime / "kernel-ipc"),
                             connection_file=str(runtime / "kernel.json"), **kwargs)

    def get_kernel_spec(self, kernel_name):
        return KernelSpec(argv=spec["argv"], env=spec["env"], display_name="Python 3 (grading sandbox)",
                          language="python", interrupt_mode="message")
    nbval.kernel.KernelManager = SandboxKernelManager
    nbval.kernel.NbvalKernelspecManager.get_kernel_spec = get_kernel_spec


def _nbval_worker(argv) -> int:
    """Run one notebook under pytest + nbval; append one JSON line per cell to the record file."""
    import pytest

    record, notebook, cell_timeout, sanitize, ini, kernel = argv
    _use_kernel(json.loads(Path(kernel).read_text(encoding="utf-8")))

    class Recorder:
        def __init__(self, stream):
            self.stream = stream

        def write(self, **entry):
            self.stream.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self.stream.flush()

        def pytest_collection_modifyitems(self, items):
            for item in items:
                if hasattr(item, "output_timeout"):
                    item.output_timeout = OUTPUT_TIMEOUT_S
                if hasattr(item, "compare_outputs"):
                    item.compare_outputs = _place_independent_compare(item.compare_outputs)

        def pytest_runtest_logstart(self, nodeid, location):
            self.write(start=int(nodeid.rsplit("Cell ", 1)[-1]))

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            yield
            if call.when == "teardown" or (call.when == "setup" and call.excinfo is None):
                return  # a cell's result is its call; a setup is recorded only when it failed
            exc = call.excinfo.value if call.excinfo else None
            skipped = call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception)
            entry = {"cell": item.cell_num, "phase": call.when,
                     "outcome": "skipped" if skipped else "failed" if exc is not None else "passed",
                     "message": (str(exc).strip().splitlines() or [type(exc).__name__])[0] if exc else "",
                     "outputs": _plain(getattr(item, "test_outputs", None))}
            if entry["message"] == "Cell outputs differ":
                entry["stored"], entry["rerun"] = _first_difference(item)
            if entry["message"].startswith("Timeout"):
                item.session.shouldstop = "a cell timed out"  # the kernel was interrupted: stop here
            self.write(**entry)

    with open(record, "w", encoding="utf-8") as stream:
        return pytest.main([notebook, "-c", ini, "--rootdir", str(Path(ini).parent), "-p", "nbval.plugin",
                            "-p", "no:cacheprovider", "--noconftest", "-q", "--color=no", "--nbval",
                            "--nbval-current-env", "--nbval-sanitize-with", sanitize,
                            f"--nbval-cell-timeout={cell_timeout}"], plugins=[Recorder(stream)])


# --- the watcher: time, memory, processes, disk and kernel death, over the run's whole process tree

def _tree(pid) -> list:
    import psutil
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return []


def _alive(proc) -> bool:
    import psutil
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(pid) -> None:
    """SIGKILL a run's process tree and the process groups in it (the kernel has its own session).
    Killing the sandbox's first process ends every process of its PID namespace, daemons included."""
    import psutil
    for _ in range(50):
        procs = [p for p in _tree(pid) if _alive(p)]
        if not procs:
            return
        for proc in procs:
            try:
                group = os.getpgid(proc.pid)
                if group != os.getpgrp():
                    os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
            try:
                proc.kill()
            except psutil.Error:
                pass
        time.sleep(0.02)


def _records(path) -> tuple[list[int], dict]:
    """The cells a run started, and its per-cell results (by nbval's code-cell number)."""
    started, results = [], {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return started, results
    for line in lines:
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a line cut short by a kill
        if "start" in entry:
            started.append(entry["start"])
        elif "cell" in entry:
            results[entry["cell"]] = entry
    return started, results


def _pending(record) -> int | None:
    started, results = _records(record)
    return started[-1] if started and started[-1] not in results else None


def disk_bytes(folder) -> int:
    """Bytes the files under ``folder`` take on disk (what a run wrote)."""
    total = 0
    for top, dirs, files in os.walk(folder, onerror=lambda exc: None):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _memory(proc, seen: set) -> int:
    """A process's share of memory (PSS: pages shared with its forks count once in all; its resident
    memory where the system does not say), plus the anonymous files it holds open (``memfd``), which
    live in memory without being mapped (each counted once, by inode, in ``seen``)."""
    import psutil
    try:
        used = proc.memory_full_info().pss
    except (psutil.Error, AttributeError):
        try:
            used = proc.memory_info().rss
        except psutil.Error:
            return 0
    fds = f"/proc/{proc.pid}/fd"
    try:
        for fd in os.listdir(fds):
            try:
                if os.readlink(f"{fds}/{fd}").startswith("/memfd:"):
                    info = os.stat(f"{fds}/{fd}")
                    if info.st_ino not in seen:
                        seen.add(info.st_ino)
                        used += info.st_blocks * 512
            except OSError:
                pass
    except OSError:
        pass
    return used


def _cpu(tree) -> float:
    """CPU seconds the processes of a tree have used (their finished children's included)."""
    import psutil
    total = 0.0
    for p in tree:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _watch(proc, record, limits: Limits, peak: list, writable=(), cpu=None) -> tuple[str, str, int | None]:
    """Wait for the worker; kill its tree past the time, memory, process or disk limit, or when the
    kernel dies mid-cell. Returns (status, reason, cell) where status is "" when the run ended by
    itself; ``peak[0]`` is the largest resident memory of the tree seen (bytes)."""
    import psutil
    cpu = cpu if cpu is not None else [0.0]
    share = limits.threads or int(kernels.pinned_environ({}, None, shared_cores=True).get("OMP_NUM_THREADS", 2))
    start, limit, kernel, died, disk_at = time.monotonic(), limits.memory_mib * 2**20, None, None, 0.0
    while proc.poll() is None:
        tree = _tree(proc.pid)
        if len(tree) > limits.processes:
            _kill(proc.pid)
            return "error", f"too many processes: the run started more than {limits.processes}", _pending(record)
        seen = set()
        used = sum(_memory(p, seen) for p in tree)
        peak[0] = max(peak[0], used)
        if used > limit:
            _kill(proc.pid)
            return "error", f"out of memory: the run used more than {limits.memory_mib} MiB", _pending(record)
        elapsed = time.monotonic() - start
        cpu[0] = max(cpu[0], _cpu(tree))
        if cpu[0] > CPU_GRACE_S + limits.cpu_factor * share * elapsed:
            _kill(proc.pid)
            return "error", (f"more than its share of the CPU: the run kept more than {share} cores busy "
                             "(processes left running?)"), _pending(record)
        if time.monotonic() - start > limits.timeout:
            _kill(proc.pid)
            return "timeout", f"the notebook ran past its {limits.timeout:g} s limit", _pending(record)
        if writable and time.monotonic() - disk_at > DISK_POLL_S:
            disk_at = time.monotonic()
            if sum(disk_bytes(w) for w in writable) > limits.disk_mib * 2**20:
                _kill(proc.pid)
                return "error", f"out of disk: the run wrote more than {limits.disk_mib} MiB", _pending(record)
        if kernel is None:
            for p in tree[1:]:
                try:
                    if any("ipykernel" in part for part in p.cmdline()):
                        kernel = p
                except psutil.Error:
                    pass
        elif not _alive(kernel) and _pending(record) is not None:
            # nbval waits for a dead kernel's reply until the cell timeout; give it a moment to
            # report (a timed-out cell whose kernel nbval stopped itself), then call it a death.
            died = died or time.monotonic()
            if time.monotonic() - died > 5:
                cell = _pending(record)
                _kill(proc.pid)
                return "error", "the kernel died", cell
        time.sleep(POLL_S)
    return "", "", None


def die_with_parent() -> None:
    """Have Linux kill this process when the one that started it ends (``PR_SET_PDEATHSIG``): a grader
    killed mid-class leaves no worker grading on, orphaned. Elsewhere it does nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _child_limits():  # pragma: no cover - runs in the child before exec
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    die_with_parent()  # the nbval worker (and, by bwrap's --die-with-parent, the kernel) ends with its grader


def remove_tree(folder) -> None:
    """Delete a run's folder, whatever the kernel did to its permissions."""
    def fix(function, path, _exc):
        try:
            parent = os.path.dirname(path)
            os.chmod(parent, os.stat(parent).st_mode | stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
                shutil.rmtree(path, onerror=fix)
            else:
                os.unlink(path)
        except OSError:
            pass
    shutil.rmtree(folder, onerror=fix)


def run_base() -> str:
    """Where the runs' folders go: ``/var/tmp`` (not ``/tmp``, which the sandbox replaces by the run's own,
    so that the one folder both sides see, the kernel's sockets, is not inside it), or the temp folder."""
    base = os.environ.get("BERTFAMILY_GRADE_TMP") or "/var/tmp"
    return base if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK) else tempfile.gettempdir()


def _sweep(base) -> None:
    """Remove the run folders of graders that are gone (a grading worker killed mid-run cannot clean up
    after itself): each folder's name holds the process id of the grader that made it."""
    import re

    for entry in Path(base).glob("bertfamily-grade-*-*"):
        found = re.match(r"bertfamily-grade-(\d+)-", entry.name)
        if not found or not entry.is_dir():
            continue
        try:
            os.kill(int(found.group(1)), 0)
        except ProcessLookupError:
            remove_tree(entry)
        except (PermissionError, OverflowError):
            pass


#: A Unix socket's path holds at most 107 bytes: the kernel's sockets need a folder with a short path.
MAX_RUNTIME_PATH = 80


def _runtime(folder: Path) -> Path:
    """The folder of the kernel's sockets and connection file, seen at the same path on both sides: the
    run's ``runtime/`` when its path is short enough for a socket, otherwise a private folder in /tmp."""
    inside = folder / "runtime"
    if len(str(inside)) <= MAX_RUNTIME_PATH:
        return inside
    return Path(tempfile.mkdtemp(prefix="bfg-", dir="/tmp" if os.path.isdir("/tmp") else None))


def run_sandboxed(nb, limits: Limits, sanitize: str, exports: dict | None = None,
                  submitted: bytes | None = None, name: str = "submission.ipynb") -> dict:
    """Run ``nb`` under nbval, its kernel in the sandbox; return what happened, cell by cell.

    The run's folder (private to the grader) holds nbval's copy of the notebook, the kernel's home,
    ``/tmp``, ``/dev/shm`` and working folder ``work/`` (with ``submitted``, the bytes as handed in,
    under ``name``), and the grader's exporter and kernel-side checks; the whole folder is deleted
    afterwards. ``exports`` maps a check cell's id to the names its check reads: the exporter sends
    them just before that cell's check runs. Returns ``{"status": "" | "timeout" | "error", "reason",
    "cell" (the code-cell number running when the run was stopped), "results" (per code-cell number),
    "exit_code", "log", "peak_mib"}``; the answers are in the check cells' outputs.
    """
    from bertfamily.grading import verify

    if limits.sandbox:
        require_sandbox()
    _sweep(run_base())
    folder = Path(tempfile.mkdtemp(prefix=f"bertfamily-grade-{os.getpid()}-", dir=run_base()))
    proc = runtime = None
    try:
        for sub in ("nb", "home", "tmp", "work", "shm", "grader", "runtime", "worker/home", "worker/tmp"):
            (folder / sub).mkdir(parents=True)
        (folder / "grader" / "export.py").write_text(verify.EXPORTER, encoding="utf-8")
        kernel_package(folder / "course")
        (folder / "work" / Path(name).name).write_bytes(submitted if submitted is not None else nbformat.writes(
            nb).encode("utf-8"))
        exporter = EXPORTER_INSIDE if limits.sandbox else folder / "grader" / "export.py"
        nb = verify.with_exports(nb, exports or {}, exporter)
        notebook, record = folder / "nb" / "submission.ipynb", folder / "record.jsonl"
        nbformat.write(nb, notebook)
        (folder / "sanitize.cfg").write_text(sanitize, encoding="utf-8")
        (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        runtime = _runtime(folder)
        argv = kernel_argv(folder, runtime, limits)
        # without the sandbox the kernel still imports the run's copy of the package (no answer key there)
        kernel_env = {} if limits.sandbox else {"PYTHONPATH": str(folder / "course")}
        (folder / "kernel.json").write_text(json.dumps({"argv": argv, "env": kernel_env}), encoding="utf-8")
        env = sandbox_env(folder if not limits.sandbox else folder / "worker", limits.threads)
        env["JUPYTER_RUNTIME_DIR"] = str(runtime)
        cmd = [sys.executable, "-c", _WORKER, str(record), str(notebook), str(limits.cell_timeout),
               str(folder / "sanitize.cfg"), str(folder / "pytest.ini"), str(folder / "kernel.json")]
        with open(folder / "log.txt", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=folder / "nb", env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_child_limits)
            peak, cpu, began = [0], [0.0], time.monotonic()
            try:
                status, reason, cell = _watch(proc, record, limits, peak,
                                              [*(folder / s for s in ("home", "tmp", "work", "shm")), runtime], cpu)
            finally:
                _kill(proc.pid)
                proc.wait()
        _, results = _records(record)
        log = (folder / "log.txt").read_text(encoding="utf-8", errors="replace")
    finally:
        if proc is not None and proc.poll() is None:
            _kill(proc.pid)
        if runtime is not None and not runtime.is_relative_to(folder):
            remove_tree(runtime)
        remove_tree(folder)
    return {"status": status, "reason": reason, "cell": cell, "results": results, "exit_code": proc.returncode,
            "log": log, "peak_mib": peak[0] / 2**20, "cpu_s": cpu[0], "wall_s": time.monotonic() - began}
