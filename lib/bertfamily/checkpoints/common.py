"""What every experiment of :mod:`bertfamily.checkpoints` shares: its settings (a frozen dataclass read
from and written to its log), the folder of weights and logs, storing and loading float16 weights, and
the record of an experiment that ``make pretrain`` runs."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import torch

#: The weights and logs, package data (so Colab has them too).
FOLDER = Path(str(files("bertfamily") / "checkpoints"))


def _frozen(value):
    """``value`` as a log holds it (lists) turned into what a settings field holds (tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    return value


def _logged(value):
    """``value`` as its log holds it: tuples as lists."""
    if isinstance(value, (list, tuple)):
        return [_logged(v) for v in value]
    if isinstance(value, dict):
        return {k: _logged(v) for k, v in value.items()}
    return value


@dataclasses.dataclass(frozen=True)
class Settings:
    """The settings of one experiment: a frozen dataclass (each experiment's module subclasses it), so
    a mistyped name fails where it is written or read, not an hour into training. Sequences are tuples;
    in the log they are lists (:meth:`to_log`, :meth:`from_log`)."""

    @classmethod
    def from_log(cls, logged: dict):
        """The settings a log holds (``log["settings"]``); a key that is not a field, or a field that is
        not there, raises a ``ValueError`` naming it."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown, missing = [k for k in logged if k not in names], [n for n in names if n not in logged]
        if unknown or missing:
            raise ValueError(
                f"{cls.__name__} does not fit these settings: unknown keys {unknown}, "
                f"missing keys {missing} (its fields: {', '.join(names)})"
            )
        return cls(**{k: _frozen(v) for k, v in logged.items()})

    def to_log(self) -> dict:
        """The settings as the log stores them (JSON's shapes: lists, not tuples)."""
        return {f.name: _logged(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def replace(self, **changes):
        """A copy with ``changes`` (names that are not fields raise a ``TypeError``)."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One experiment of ``make pretrain``: its log's name (``<name>.json``), the lessons that read it, its
    settings, and ``run(progress, record, settings=settings) -> log``, which trains and stores the weights.
    ``record(log)`` writes the log as it stands (with the machine and the seconds so far; the experiment calls
    it where a run cut short should leave what it has), ``progress(line)`` reports. ``native``: trained with
    the machine's own kernels (bfloat16 products), not the pinned ones."""

    name: str
    lessons: str
    settings: Settings
    run: Callable[[Callable, Callable], dict]
    native: bool = False

    def read(self) -> dict:
        """The log, its settings checked against :attr:`settings`' fields (``Settings.from_log``)."""
        log = read_log(self.name)
        type(self.settings).from_log(log["settings"])
        return log


def path_of(name: str) -> Path:
    return FOLDER / name


def read_log(name: str) -> dict:
    """The training log ``<name>.json`` (``"masking"``, ``"tlm"``, ``"course"``, ...)."""
    path = path_of(f"{name}.json")
    if not path.is_file():
        raise FileNotFoundError(f"no training log {path}: run `make pretrain` in a clone of the course")
    return json.loads(path.read_text(encoding="utf-8"))


def write_log(name: str, log: dict) -> Path:
    """Write ``log`` as ``<name>.json`` (indented by one, as every log is)."""
    path = path_of(f"{name}.json")
    path.write_text(json.dumps(log, indent=1) + "\n", encoding="utf-8")
    return path


def halve(model) -> None:
    """Round ``model``'s weights to float16 and back, in place: what storing them keeps."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().float())


def save(model, name: str) -> Path:
    path = path_of(f"{name}.pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    state, seen = {}, set()
    for key, value in model.state_dict().items():
        if value.data_ptr() in seen:  # a tied copy (the output layer is the input embedding): stored once
            continue
        seen.add(value.data_ptr())
        state[key] = value.half() if value.is_floating_point() else value
    torch.save(state, path)
    return path


def load_into(model, name: str):
    """``model`` with the stored weights ``name`` (float16 on disk, float32 in the model), in eval mode."""
    path = path_of(f"{name}.pt")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint {path}: run `make pretrain` in a clone of the course")
    state = torch.load(path, map_location="cpu", weights_only=True)
    missing, unexpected = model.load_state_dict(
        {k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=False
    )
    shared = Counter(v.data_ptr() for v in model.state_dict().values())
    tied = {k for k, v in model.state_dict().items() if shared[v.data_ptr()] > 1}
    if unexpected or set(missing) - tied:
        raise ValueError(
            f"{path} does not fit this model: missing {sorted(set(missing) - tied)}, unexpected {sorted(unexpected)}"
        )
    return model.eval()


def file_name(name: str, key: str, seed: int) -> str:
    return f"{name}-{key.replace(' ', '')}-seed{seed}"
