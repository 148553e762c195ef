"""The test environment is locked (requirements-lock.txt, installed as constraints by make setup): the
lock pins every package pyproject.toml asks for, within pyproject's own bounds, and this environment
runs the locked versions (CI's .venv is made from it)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-lock.txt"


def locked(text: str) -> dict[str, Requirement]:
    """The lock's pins by canonical name; a line that is not `name==version` raises ValueError."""
    pins = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            req = Requirement(line)
            if len(req.specifier) != 1 or next(iter(req.specifier)).operator != "==":
                raise ValueError(f"{line!r}: the lock pins exact versions (name==version)")
            pins[canonicalize_name(req.name)] = req
    return pins


def wanted() -> list[Requirement]:
    """What make setup installs: the dependencies and the book and test extras, for this Python."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = [
        Requirement(r)
        for r in project["dependencies"]
        + project["optional-dependencies"]["book"]
        + project["optional-dependencies"]["test"]
    ]
    return [r for r in found if r.marker is None or r.marker.evaluate()]


def version(req: Requirement) -> str:
    return next(iter(req.specifier)).version


def problems(pins: dict[str, Requirement]) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """What pyproject asks for that the lock leaves out, and the pins outside pyproject's bounds."""
    missing = [r.name for r in wanted() if canonicalize_name(r.name) not in pins]
    outside = {
        r.name: (str(r.specifier), version(pins[canonicalize_name(r.name)]))
        for r in wanted()
        if canonicalize_name(r.name) in pins
        and not r.specifier.contains(version(pins[canonicalize_name(r.name)]), prereleases=True)
    }
    return missing, outside


def test_the_lock_pins_every_requirement_within_pyprojects_bounds():
    pins = locked(LOCK.read_text(encoding="utf-8"))
    assert problems(pins) == ([], {})
    planted = {**pins, "ruff": Requirement("ruff==0.1.0")}  # pyproject pins ruff==0.17.5
    del planted["nbval"]
    assert problems(planted) == (["nbval"], {"ruff": ("==0.17.5", "0.1.0")})


def test_a_line_that_is_not_a_pin_is_refused():
    assert set(locked("# a comment\ntorch==2.13.0\n")) == {"torch"}
    with pytest.raises(ValueError, match="pins exact versions"):
        locked("numpy>=2\n")


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not in a virtual environment made by make setup")
def test_this_environment_runs_the_locked_versions():
    """Every locked package installed here at its locked version (make setup installed it so)."""
    differ = {}
    for name, req in locked(LOCK.read_text(encoding="utf-8")).items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            differ[name] = "not installed"
            continue
        if not req.specifier.contains(have, prereleases=True):
            differ[name] = f"{have}, locked {version(req)}"
    assert differ == {}, f"run make setup (or make lock, then make test): {differ}"
