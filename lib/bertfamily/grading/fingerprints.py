"""What must match between the instructor's machine and a grading worker: Python, the course package
(its version and a digest of all its files), the libraries that decide outputs, and a sandbox in
which a kernel starts. The exercise is no part of it: each task carries it (with the sanitize rules),
and the journal records its digest (:func:`~bertfamily.grading.journal.run_settings`)."""

from __future__ import annotations

import hashlib
import platform
from importlib import metadata
from pathlib import Path

from bertfamily.grading import sandbox
from bertfamily.grading.monitor import Limits
from bertfamily.grading.mounts import SandboxMissing, course_package_dir

#: What a worker must have as the instructor has it, besides the course package: the libraries
#: whose versions can change what a notebook prints, and what runs it.
LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "nbval", "nbclient", "nbformat", "ipykernel", "pytest")


def bytes_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def package_digest(folder=None) -> str:
    """A digest of every file of the course package (names and bytes; compiled caches left out)."""
    folder = Path(folder or course_package_dir())
    h = hashlib.sha256()
    for path in sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    ):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def package_files(folder=None) -> dict:
    """Every file of the installed course package by its path, with a digest of its bytes: taken when the
    grader starts, and again when it has graded (:func:`package_changes`)."""
    root = Path(folder or course_package_dir())
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def package_changes(started: dict, folder=None) -> list[str]:
    """The files of the installed course package that changed since ``started`` (:func:`package_files`).
    No kernel can change them (each sees its own read-only copy); the grader says so if something else did."""
    now = package_files(folder)
    return sorted(k for k in set(now) | set(started) if now.get(k) != started.get(k))


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


#: This process's fingerprint, computed once (a worker computes its own on its first check).
_FINGERPRINT: dict = {}


def fingerprint() -> dict:
    """What must be the same on the instructor's machine and on every worker, by name."""
    if not _FINGERPRINT:
        import bertfamily

        _FINGERPRINT.update(
            {
                "Python": platform.python_version(),
                "bertfamily version": bertfamily.__version__,
                "bertfamily files (SHA-256 of all)": package_digest(),
                **{f"{name} version": _version(name) for name in LIBRARIES},
            }
        )
    return dict(_FINGERPRINT)


def short_digest(value: str) -> str:
    return value[:12] + "…" if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else value


def differences(expected: dict, found: dict) -> list[str]:
    """What differs between the instructor's fingerprint and a worker's, in words."""
    return [
        f"{key}: {short_digest(str(found.get(key, 'missing')))} on the worker, {short_digest(str(value))} here"
        for key, value in expected.items()
        if found.get(key) != value
    ]


_SANDBOX: list = []


def sandbox_problem_for(limits: Limits) -> str | None:
    """Why this machine cannot run the sandbox that ``limits`` asks for, or start a kernel in it (one
    probe run, :func:`~bertfamily.grading.sandbox.probe_kernel`); None: it can. Checked once."""
    check = getattr(sandbox, "sandbox_problem", None)
    if check is None or not getattr(limits, "sandbox", True):
        return None
    if not _SANDBOX:
        problem = check()
        if problem is None:
            try:
                sandbox.probe_kernel(limits)
            except SandboxMissing as exc:
                problem = str(exc)
        _SANDBOX.append(problem)
    return _SANDBOX[0]


def worker_problems(expected: dict, limits: Limits) -> list[str]:
    """Why this process may not grade for an instructor whose fingerprint is ``expected`` (none: it may)."""
    differ = differences(expected, fingerprint())
    if differ:  # a worker that differs grades nothing: its sandbox need not be tried
        return differ
    problem = sandbox_problem_for(limits)
    return [f"no sandbox: {problem}"] if problem else []
