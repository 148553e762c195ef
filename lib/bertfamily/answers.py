"""A student's answer as the exercise's self-checks read it, and the one line each check prints.

A check of :mod:`bertfamily.checks` never raises on a student's answer. :func:`as_number` and
:func:`model_kind` read an answer, or raise :class:`Missing` (a placeholder still ``None``) or
:class:`Wrong` (a model where a number was expected, text where a model was expected, ...), whose
message is the hint; :func:`guarded` turns either into a failing verdict, and says so where a size the
task asks to measure is the size of no saved file (:func:`saved_file`), as the grader does. :func:`verdict` prints a
check's verdict: ``✓`` (right) or ``✗`` (not yet), the task and a message, then one line per hint;
:mod:`bertfamily.grading` reads those lines.

This module imports nothing of the course, and torch only where an answer may be a tensor or a model.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import inspect
import numbers
import os
import sys
import tempfile

PASS, FAIL = "✓", "✗"


def verdict(ok: bool, task: str, message: str, hints=()) -> bool:
    """Print ``task``'s verdict line and its hints; return ``ok``."""
    print(f"{PASS if ok else FAIL} {task}: {message}")
    for hint in hints:
        print(f"  hint: {hint}")
    return ok


class Wrong(Exception):
    """An answer of the wrong kind; its message is the hint (caught inside the checks, never raised)."""


class Missing(Wrong):
    """A placeholder still ``None``: no answer yet."""


def describe_answer(value) -> str:
    """What ``value`` is, in a few words, for a hint: a model, a tensor's shape, or its type and repr."""
    try:
        import torch

        if isinstance(value, torch.nn.Module):
            return f"a model ({type(value).__name__})"
        if isinstance(value, torch.Tensor):
            return f"a tensor of shape {tuple(value.shape)}"
    except ImportError:  # pragma: no cover
        pass
    return f"{type(value).__name__} {value!r}"[:80]


def as_number(value, name: str, integer: bool = False) -> float:
    """``value`` as a Python number, or :class:`Wrong` with a hint saying what was expected."""
    kind = "a whole number" if integer else "a number"
    if value is None:
        raise Missing(
            f"`{name}` is still None: replace the placeholder with your code, then run the cell before this check"
        )
    if isinstance(value, bool):
        raise Wrong(f"`{name}` should be {kind}, got {value!r}")
    try:
        import torch

        if isinstance(value, torch.nn.Module):
            raise Wrong(
                f"`{name}` should be {kind}, got {describe_answer(value)}: compute the number "
                "from the model rather than passing the model itself"
            )
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise Wrong(f"`{name}` should be {kind}, got {describe_answer(value)}")
            value = value.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, str):
        raise Wrong(
            f"`{name}` should be {kind}, not the text {value[:40]!r}: keep the number "
            "itself, format it only when you print it"
        )
    if not isinstance(value, numbers.Real):
        raise Wrong(f"`{name}` should be {kind}, got {describe_answer(value)}")
    value = float(value) if not isinstance(value, numbers.Integral) else int(value)
    if value != value or value in (float("inf"), float("-inf")):  # before int(): NaN and inf have none
        raise Wrong(f"`{name}` should be a finite number, got {value!r}")
    if integer and value != int(value):
        raise Wrong(f"`{name}` should be {kind} (an exact count), got {value!r}")
    return int(value) if integer else value


def close(value, target, rel) -> bool:
    """``value`` within ``rel`` (relative) of ``target``."""
    return abs(value - target) <= rel * abs(target)


def model_kind(model, name: str) -> tuple:
    """``(model type, class name)`` of a model answer, or :class:`Wrong` / :class:`Missing`."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        raise Wrong("torch is needed") from None
    if model is None:
        raise Missing(f"`{name}` is still None: replace the placeholder with your code")
    if not isinstance(model, torch.nn.Module):
        raise Wrong(f"`{name}` should be a transformers model, got {describe_answer(model)}")
    config = getattr(model, "config", None)
    return getattr(config, "model_type", None), type(model).__name__


#: Where a notebook saves its files and how far :func:`saved_file` looks: the temporary folder (the
#: exercise's ``workdir`` is made there), the working folder and the home folder, as deep as the grader
#: looks in a run's files (64 levels), at most LOOK_ENTRIES entries in each.
LOOK_DEPTH, LOOK_ENTRIES = 64, 20_000
#: False while the grader runs the checks in its own process: it checks the run's files itself.
_LOOK = contextvars.ContextVar("look_for_files", default=True)


@contextlib.contextmanager
def files_checked_elsewhere():
    """The checks run without looking for files (the grader's process, which holds none of the run's)."""
    token = _LOOK.set(False)
    try:
        yield
    finally:
        _LOOK.reset(token)


def _places() -> list[str]:
    """Where :func:`saved_file` looks, in order: the notebook's ``workdir`` (the exercise's folder for its
    files, where it is defined), the temporary folder, the working folder, the home folder."""
    workdir = getattr(sys.modules.get("__main__"), "workdir", None)
    first = [os.fspath(workdir)] if isinstance(workdir, (str, os.PathLike)) else []
    return list(dict.fromkeys([*first, tempfile.gettempdir(), os.getcwd(), os.path.expanduser("~")]))


def saved_file(size: int) -> str | None:
    """A file of exactly ``size`` bytes, at least 90% of them on disk (not a sparse file), in the places a
    notebook saves to (:func:`_places`, level by level, :data:`LOOK_DEPTH` deep, :data:`LOOK_ENTRIES` entries
    a place); None when there is none. The grader asks the same of the files a run held when its check ran:
    a size measured in memory (``io.BytesIO``) or of a file deleted since is not one."""
    for root in _places():
        queue, seen = collections.deque([(root, 0)]), 0
        while queue and seen < LOOK_ENTRIES:
            folder, depth = queue.popleft()  # level by level: a kept file near the top is found first
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > LOOK_ENTRIES:
                            break
                        if entry.is_dir(follow_symlinks=False) and depth < LOOK_DEPTH:
                            queue.append((entry.path, depth + 1))
                        elif entry.is_file(follow_symlinks=False):
                            info = entry.stat(follow_symlinks=False)
                            if info.st_size == size and getattr(info, "st_blocks", size) * 512 >= 0.9 * size:
                                return entry.path
            except OSError:
                continue
    return None


def _unsaved(check, args, kwargs, files) -> list[str]:
    """The answers among ``files`` (argument names) that are sizes of no saved file (:func:`saved_file`)."""
    if not files or not _LOOK.get():
        return []
    try:
        bound = inspect.signature(check).bind(*args, **kwargs).arguments
    except TypeError:
        return []
    hints = []
    for name in files:
        value = bound.get(name)
        if (
            isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and value > 0
            and (value != int(value) or saved_file(int(value)) is None)
        ):
            hints.append(
                f"`{name}` ({value:,}) is not the size of a file your notebook saved: save with "
                "torch.save to a file in `workdir`, keep it, and measure that file (os.path.getsize; one "
                "file, not a folder's files added up); "
                "a size measured in memory (io.BytesIO) or of a file deleted since does not count, "
                "for this check or the grader"
            )
    return hints


def guarded(task, files=()):
    """Decorator: turn a :class:`Wrong` into a failing verdict (a hint, never a traceback). ``files``: the
    arguments that are sizes of saved files; where one is not (:func:`saved_file`), the verdict fails."""

    def wrap(check):
        @functools.wraps(check)
        def run(*args, **kwargs):
            try:
                unsaved = _unsaved(check, args, kwargs, files)
                if unsaved:
                    return verdict(False, task, "not the size of a saved file", unsaved)
                return check(*args, **kwargs)
            except Missing as missing:
                return verdict(False, task, "no answer yet", [str(missing)])
            except Wrong as wrong:
                return verdict(False, task, "not an answer of the expected kind yet", [str(wrong)])

        return run

    return wrap
