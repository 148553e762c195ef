"""The sandbox's walls: what a student's kernel sees, and the bubblewrap command that builds it.

* Namespaces: new user (no nested one: ``--disable-userns``), PID, network, IPC, UTS and cgroup; an
  unprivileged user without capabilities. A grader that runs as root starts the sandbox as an
  unprivileged outer user (``nobody``, :func:`outer_ids`), so the kernel owns none of root's files.
* Its file system is an empty, size-capped tmpfs (``--disk-mib``, the only writable space: its home,
  ``/tmp``, its working folder) with read-only views of the system, of only the ``/etc`` files Python
  needs (:data:`ETC`; ``passwd``, ``group`` and ``hosts`` are the sandbox's own), of Python and of a
  copy of the course package made for the run (:func:`kernel_package`: no grader, no answer key, no
  calculator of answers). A read-only ``/dev`` with a ``/dev/shm`` of its own, as large as the run's
  memory and counted in it (torch's worker processes share tensors there).
* The folders above those views (the instructor's home, the checkout) cannot be listed: only the
  paths Python needs exist in them, on read-only mounts.
* Bubblewrap starts with an empty environment (:data:`LAUNCHER`), so the sandbox's first process's
  ``/proc/1/environ`` is empty; a root grader binds what the kernel needs where its outer user can
  reach it. The sandbox works wherever Python and the course are installed, ``/tmp`` included.
"""
from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bertfamily import kernels
from bertfamily.exercise_rules import REFUSED, kernel_stub
from bertfamily.grading.channel import kernel_checks_source
from bertfamily.grading.standins import KERNEL, STANDINS

#: Where the run's writable folders appear inside the sandbox, and the grader's exporter (read-only).
INSIDE = Path("/sandbox")
EXPORTER_INSIDE = "/grader/export.py"
UNSAFE_FLAG = "--unsafe-no-sandbox"
HUB = "hub"  # the run's served hub cache (:mod:`~bertfamily.grading.hub`), read-only under INSIDE
SANDBOX_UID = 1000  # the kernel's user inside the sandbox
_KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ")
#: Read-only system folders (what a Linux Python and its libraries load).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/sys/devices/system/cpu")
#: The only files of the host's /etc the kernel sees: what the loader, the C library, locales and
#: time zones read. Users, groups, host names are the sandbox's own (:func:`etc_files`).
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "nsswitch.conf", "host.conf",
       "gai.conf", "mime.types", "alternatives", "fonts", "os-release", "debian_version", "locale.alias",
       "locale.conf", "default/locale", "protocols", "services")
#: What the kernel's copy of the course package leaves out: the grader (which knows the reference) and
#: compiled files; its ``checks.py`` is the kernel's, without the expected values.
HIDDEN = ("grading", "__pycache__")
#: The course's calculators of answers (the parameter budget, the quantised-size predictor): absent
#: from the kernel's copy, with every module that imports them, however a notebook reaches for them.
CALCULATORS = ("budget", "quantization")


class SandboxMissing(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here: untrusted code must not run."""


def sandbox_env(folder, threads: int | None = None) -> dict:
    """The environment of a kernel: PATH and locale only, offline, HOME and caches inside ``folder``.

    Nothing else of the instructor's environment passes (no tokens, keys, credentials, proxies; the
    ``PATH`` is Python's folder and the system's, none of the instructor's own).
    The numerical kernels are pinned as for the committed outputs (:mod:`bertfamily.kernels`), with
    ``threads`` torch threads (the grader gives each of its jobs cores / jobs). In the sandbox
    ``folder`` is :data:`INSIDE`, the run's folder as the kernel sees it.
    """
    folder = Path(folder)
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV or k.startswith("LC_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    for name, sub in (("HOME", "home"), ("TMPDIR", "tmp"), ("IPYTHONDIR", "home/.ipython"),
                      ("JUPYTER_CONFIG_DIR", "home/.jupyter"), ("JUPYTER_DATA_DIR", "home/.jupyter-data"),
                      ("JUPYTER_RUNTIME_DIR", "home/.jupyter-runtime"), ("MPLCONFIGDIR", "home/.matplotlib"),
                      ("HF_HOME", "home/.cache/huggingface")):
        env[name] = str(folder / sub)
    env["HF_HUB_CACHE"] = str(folder / HUB)  # the course's models under their hub names (grading.hub)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1",
               JUPYTER_PLATFORM_DIRS="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONNOUSERSITE="1")  # a .pth file the run writes into ~/.local is not run by a later Python
    switch = {k: v for k, v in os.environ.items() if k == kernels.SWITCH}  # only the documented switch passes
    env.update(kernels.pinned_environ(switch, threads, shared_cores=True))
    return env


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def bwrap_options() -> frozenset:
    """The options this bubblewrap knows (``--disable-userns`` came with 0.8, ``--ro-bind-fd`` with 0.8)."""
    bwrap = bwrap_path()
    if bwrap is None:
        return frozenset()
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(w for w in (done.stdout + done.stderr).split() if w.startswith("--"))


def outer_ids() -> tuple[int, int] | None:
    """The unprivileged (uid, gid) the sandbox runs as outside when the grader runs as root
    (``nobody``, or ``BERTFAMILY_GRADE_UID=uid[:gid]``); None when the grader is not root (the sandbox
    then maps to the grader's own user)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    given = os.environ.get("BERTFAMILY_GRADE_UID", "")
    if given:
        uid, _, gid = given.partition(":")
        return int(uid), int(gid or uid)
    import pwd
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def namespaces() -> list[str]:
    disable = ["--disable-userns"] if "--disable-userns" in bwrap_options() else []
    return ["--unshare-user", *disable, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL"]


#: Runs bubblewrap for a kernel, with an empty environment (so the sandbox's first process shows
#: nothing in ``/proc/1/environ``). A grader that runs as root gives the sandbox an unprivileged outer
#: user: in a mount namespace of its own, it first binds each host path the kernel needs (which root
#: can reach, under its own home too) onto the run's ``view/`` folder, hands the kernel its connection
#: file, then leaves root. Its arguments: the launch file and the connection file (jupyter_client fills
#: in ``{connection_file}`` in every argument, this code included: it must not contain that word).
LAUNCHER = r'''
import ctypes, json, os, sys
spec = json.load(open(sys.argv[1], encoding="utf-8"))
ids, libc, staged = spec["ids"], ctypes.CDLL(None, use_errno=True), False
if ids:  # a private mount namespace (CLONE_NEWNS), nothing propagating back (MS_REC | MS_PRIVATE)
    staged = libc.unshare(0x20000) == 0 and libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None) == 0
args = [spec["bwrap"]]
for number, arg in enumerate(spec["args"]):
    if isinstance(arg, list):
        arg = arg[1]
        if staged:
            view = os.path.join(spec["view"], str(number))
            if os.path.isdir(arg):
                os.mkdir(view, 0o755)
            else:
                os.close(os.open(view, os.O_CREAT | os.O_WRONLY, 0o644))
            if libc.mount(arg.encode(), view.encode(), None, 0x1000 | 0x4000, None) != 0:  # MS_BIND | MS_REC
                sys.exit(f"the grader could not bind {arg} for the sandbox: {os.strerror(ctypes.get_errno())}")
            arg = view
    args.append(arg.replace("@connection_file@", sys.argv[2]))
if ids:
    os.chown(sys.argv[2], *ids)
    os.setgroups([])
    os.setgid(ids[1])
    os.setuid(ids[0])
os.dup2(1, 2)  # nbval sends a kernel's stderr to /dev/null: bubblewrap's and Python's errors go to the log
os.execve(spec["bwrap"], args, {})
'''


def launch_command(spec_path) -> list[str]:
    """The kernel's command line (a kernelspec's argv) for a launch file."""
    return [sys.executable, "-c", LAUNCHER, str(spec_path), "{connection_file}"]


def etc_files(folder: Path) -> dict:
    """The sandbox's own ``/etc/passwd``, ``group``, ``hosts`` and ``hostname``, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"passwd": f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{INSIDE}/home:/bin/sh\n"
                       "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             "group": f"sandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n",
             "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n", "hostname": "sandbox\n"}
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
        os.chmod(folder / name, 0o644)
    return {f"/etc/{name}": folder / name for name in files}


def _system(path: Path) -> bool:
    return any(path == Path(s) or path.is_relative_to(s) for s in SYSTEM)


def walls(binds: list[tuple[str, Path, Path]], listable=()) -> tuple[list, list]:
    """The arguments that hide what is above the host paths the kernel needs: each top folder (the
    instructor's home, the checkout's parent) is an empty tmpfs, read-only once the paths are bound,
    and each folder between it and a bound path can be crossed but not listed (but ``listable``, which
    Python lists to import from). ``/tmp`` stays the run's writable /tmp. Returns (arguments, tops)."""
    args, made, tops = [], set(), []
    for _, _, dest in binds:
        if _system(dest) or len(dest.parts) < 2:
            continue
        top = Path("/", dest.parts[1])
        if top != Path("/tmp") and top not in tops and top != dest:
            tops.append(top)
            args += ["--perms", "0555" if top in listable else "0111", "--size", str(2**16), "--tmpfs", str(top)]
        for above in list(reversed(dest.parents))[2:]:
            if above not in made:
                made.add(above)
                args += ["--perms", "0555" if above in listable else "0111", "--dir", str(above)]
    return args, tops


#: One of bubblewrap's arguments: a word, or ``["host", path]`` for a host path the kernel sees.
BwrapArg = str | list[str]


#: The folders where notebook platforms have a student write (lecturer round 11: Colab's working folder /content,
#: Kaggle's /kaggle/working; a model saved there raised "Parent directory /content does not exist" and cost every
#: task after it): made in each sandbox, empty and writable, on its disk (counted in its limit, sizes recorded).
WORK_FOLDERS = ("/content", "/kaggle/working")


def bwrap_args(folder: Path, runtime: Path, limits, submitted: str, roots: list[Path],
               package: Path) -> list[BwrapArg]:
    """bubblewrap's arguments for one run, up to the command; a host path the kernel sees is
    ``["host", path]`` (the launcher may bind it elsewhere first)."""
    disk = limits.disk_mib * 2**20
    shm = limits.memory_mib * 2**20  # shared memory is memory: counted in the run's memory, as large
    args: list[BwrapArg] = [*namespaces(), "--clearenv", "--size", str(disk), "--perms", "0755", "--tmpfs", "/",
                            "--perms", "01777", "--dir", "/tmp"]
    for folder_of_a_platform in WORK_FOLDERS:  # Colab's /content, Kaggle's /kaggle/working: empty, writable
        args += ["--perms", "01777", "--dir", folder_of_a_platform]
    for system in SYSTEM:
        args += ["--ro-bind-try", system, system]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for python in sorted(Path("/etc").glob("python3*")):  # Debian's Python reads its sitecustomize there
        args += ["--ro-bind-try", str(python), str(python)]
    for dest, source in etc_files(folder / "etc").items():
        args += ["--ro-bind", ["host", str(source)], dest]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(shm), "--perms", "01777", "--tmpfs", "/dev/shm"]
    binds = [("--ro-bind", root, root) for root in roots]
    binds += [("--ro-bind", folder / "course" / "bertfamily", package),  # over site-packages too
              ("--ro-bind", folder / "grader" / "export.py", Path(EXPORTER_INSIDE)),
              ("--bind", runtime, runtime)]
    hide, tops = walls(binds, listable={package.parent})  # Python lists the folder it imports the course from
    args += hide
    for option, source, dest in binds:
        args += [option, ["host", str(source)], str(dest)]
    for sub in ("", "home", "tmp", "work"):
        args += ["--dir", str(INSIDE / sub)]
    args += ["--ro-bind", ["host", str(folder / "submitted" / submitted)], str(INSIDE / "work" / submitted)]
    if (folder / HUB).is_dir():
        args += ["--ro-bind", ["host", str(folder / HUB)], str(INSIDE / HUB)]
    for top in tops:
        args += ["--remount-ro", str(top)]
    args += ["--remount-ro", "/dev", "--chdir", str(INSIDE / "work")]
    for key, value in sandbox_env(INSIDE, limits.threads).items():
        args += ["--setenv", key, value]
    entries = [kernel_pythonpath(package)]
    if (folder / STANDINS).is_dir():  # google.colab (bertfamily.grading.standins), after the course's own path
        args += ["--ro-bind", ["host", str(folder / STANDINS)], str(INSIDE / STANDINS)]
        entries.append(str(INSIDE / STANDINS))
    if (path := os.pathsep.join(e for e in entries if e)):
        args += ["--setenv", "PYTHONPATH", path]
    return args


def kernel_pythonpath(package: Path) -> str | None:
    """The kernel's ``PYTHONPATH`` in the sandbox: the folder of the course package (``package``), where
    the grader itself imported the course through ``PYTHONPATH`` (a checkout run as
    ``PYTHONPATH=lib python -m bertfamily.grading``, not installed in this Python); else none. The sandbox
    starts with an empty environment, so without it such a kernel would import the course from where this
    Python installed it (another checkout, or nowhere: ``No module named 'bertfamily'``), not from the
    run's copy that is bound at ``package``."""
    folder = Path(package).resolve().parent
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    return str(folder) if any(Path(e).resolve() == folder for e in entries) else None


def view_base() -> str:
    """Where a root grader puts a run's ``view`` folder: a folder every user may cross (``/tmp``), so
    that the unprivileged outer user reaches it wherever the run's own folder is."""
    return "/tmp" if os.path.isdir("/tmp") and os.stat("/tmp").st_mode & 0o001 else "/var/tmp"


def write_launch(folder: Path, runtime: Path, limits, submitted: str,
                 hidden: Path | None = None) -> tuple[Path, Path | None]:
    """The launch file of one run's kernel (see :data:`LAUNCHER`), and the empty ``view`` folder a root
    grader binds the kernel's paths onto (None when the grader is not root); remove it after the run.
    ``hidden``: a folder no mounted root may hold (:func:`python_roots`)."""
    import tempfile

    args = bwrap_args(folder, runtime, limits, submitted, python_roots(hidden), course_package_dir())
    args += ["--", sys.executable, "-m", KERNEL, "-f", "@connection_file@"]
    path, ids, view = folder / "launch.json", outer_ids(), None
    if ids:  # its binds exist only in the launcher's own mount namespace; the host sees empty entries
        view = Path(tempfile.mkdtemp(prefix=f"bfg-{os.getpid()}-view-", dir=view_base()))
        os.chmod(view, 0o711)
    spec = {"bwrap": bwrap_path(), "args": args, "ids": ids, "view": str(view)}
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path, view


def course_package_dir() -> Path:
    import bertfamily
    return Path(bertfamily.__file__).resolve().parent


def python_roots(hidden: Path | None = None) -> list[Path]:
    """Folders the kernel's Python needs, read-only: the interpreter's prefixes and the site-packages
    folders on sys.path, but never a folder that holds ``hidden`` (the folder of the reference solution
    being graded against); the package itself is replaced by the run's copy (:func:`kernel_package`)."""
    secret = Path(hidden).resolve() if hidden is not None and Path(hidden).is_dir() else None
    roots: list[Path] = []
    candidates = [sys.base_prefix, sys.prefix, sys.exec_prefix]
    candidates += [p for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")]
    for entry in candidates:
        path = Path(entry).resolve()
        if not path.is_dir() or (secret is not None and secret.is_relative_to(path)) \
                or any(path.is_relative_to(r) for r in roots) or _system(path):
            continue
        roots = [r for r in roots if not r.is_relative_to(path)] + [path]
    return roots


def _imports(source: str, module: str) -> set[str]:
    """The course modules (relative names, ``budget``) that a module of the package imports."""
    found: set[str] = set()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return found
    package = module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] if node.level > 1 else package
                named = ".".join([*base, node.module] if node.module else base)
            elif node.module and (node.module == "bertfamily" or node.module.startswith("bertfamily.")):
                named = node.module[len("bertfamily"):].lstrip(".")
            else:
                continue
            found.add(named)
            found.update(f"{named}.{a.name}".lstrip(".") for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name[len("bertfamily."):] for a in node.names if a.name.startswith("bertfamily."))
    return found


_ANSWERING: dict = {}


def _answering(signature: tuple, target: Path) -> frozenset:
    """The modules of a copy of the package that compute answers: the calculators and every module
    that imports one. Read once per version of the package (``signature``: each module's size and
    time), not once per run."""
    if signature not in _ANSWERING:
        _ANSWERING.clear()
        _ANSWERING[signature] = _read_answering(signature, target)
    return _ANSWERING[signature]


def _read_answering(signature: tuple, target: Path) -> frozenset:
    modules = {m: target.joinpath(*m.split(".")).with_suffix(".py") for m, _, _ in signature}
    gone = {m for m in modules if m in CALCULATORS}
    while True:
        more = {m for m, p in modules.items() if m not in gone and m != "checks"
                and _imports(p.read_text(encoding="utf-8", errors="replace"), m) & gone}
        if not more:
            return frozenset(gone)
        gone |= more


def kernel_package(dest: Path) -> Path:
    """The course package as the kernel sees it, copied into ``dest``: as installed now, without the
    grader, without the calculators of answers (:data:`CALCULATORS`; in their place, modules that raise the
    ``ImportError`` the student's own notebook raises: :mod:`bertfamily.exercise_rules`) and every module
    that imports one,
    and with the kernel's ``checks`` (no answer key). Read-only in the sandbox; one per run, so nothing
    an instructor changes mid-class, and nothing a run does, reaches another run."""
    source, target = course_package_dir(), Path(dest) / "bertfamily"
    shutil.copytree(source, target, ignore=lambda top, names: [
        n for n in names if n in HIDDEN and Path(top) == source or n == "__pycache__"])
    modules = {".".join(p.relative_to(target).with_suffix("").parts): p for p in target.rglob("*.py")}
    signature = tuple(sorted((m, p.stat().st_size, p.stat().st_mtime_ns) for m, p in modules.items()))
    for module in _answering(signature, target):
        modules[module].unlink()
    for module in REFUSED:  # the calculators the student may not import: an ImportError that says why
        target.joinpath(*module.split(".")[1:]).with_suffix(".py").write_text(kernel_stub(module), encoding="utf-8")
    (target / "checks.py").write_text(kernel_checks_source(), encoding="utf-8")
    return target
