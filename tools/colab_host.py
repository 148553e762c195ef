"""The environment ``make colab-check`` runs the lessons in (the host): what a notebook's first cell can
reach of Colab's package set, at Colab's versions.

``pip install`` only ever changes the packages in its own resolution, so the host need not hold all of
Colab's packages (:mod:`tools.colab_manifest`), only those a first cell could touch: what the course
and the check need (:func:`host_roots`), installed under constraints that pin every package of the
manifest (:func:`constraints`, but the pins a stand-in's own requirements rule out:
:func:`lifted_pins`), then whatever the first cell's dry run would install and the host lacks, round
after round until nothing is left (:func:`close_host`). :func:`replaced` and :func:`added_otherwise`
read what a notebook's first cell changed there; :func:`describe_host` says where the host differs
from Colab. The whole argument is in :mod:`tools.standalone`'s docstring.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tools.colab_manifest import normalise, toml_reader
from tools.nb import ROOT

#: What the check itself runs in the host, as Colab's Jupyter has it: pip (the first cell's installer),
#: the kernel and nbclient's runner.
RUNNER_PACKAGES = ("pip", "ipykernel", "nbclient", "nbformat")
#: Dry runs of the first cell before the host is taken as closed (each round adds what the last named).
ROUNDS = 6


def colab_version(spec: dict, name: str) -> str:
    """What the host installs for ``name``: the stand-in's version where it has one, else Colab's."""
    return spec["stand_ins"].get(name, (spec["packages"][name],))[0]


def constraints(spec: dict, lifted=()) -> list[str]:
    """``name==version`` for every package of the manifest (a stand-in's version where it has one),
    but those in ``lifted``: given to pip as constraints, whatever it installs from the list comes at
    Colab's version."""
    return [f"{name}=={colab_version(spec, name)}" for name in spec["packages"] if name not in lifted]


def lifted_pins(spec: dict, requires: dict[str, list[str]]) -> dict[str, str]:
    """Pins of the manifest that a stand-in's own requirements rule out (torch 2.13.0 needs
    ``setuptools>=77.0.3``, Colab has 75.2.0): name -> why. ``requires``: stand-in -> its
    ``Requires-Dist`` lines. The host installs those packages at what the stand-in needs, and says so."""
    from packaging.requirements import Requirement

    out = {}
    for standin, lines in requires.items():
        for line in lines:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue  # an extra's, or another platform's
            name = normalise(requirement.name)
            if (
                name in spec["packages"]
                and name not in spec["stand_ins"]
                and not requirement.specifier.contains(spec["packages"][name], prereleases=True)
            ):
                out[name] = (
                    f"Colab's {spec['packages'][name]}; the stand-in {standin} "
                    f"{colab_version(spec, standin)} needs {requirement.name}{requirement.specifier}"
                )
    return out


def _pip_report(python: Path, args: list[str], env: dict) -> tuple[list | None, str]:
    """pip's dry run of ``install args`` in ``python``'s environment, installing nothing (``--dry-run --report``):
    the report's ``install`` items, or None and pip's error where it failed."""
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    return (None, done.stderr.strip()) if done.returncode else (json.loads(done.stdout)["install"], "")


def stand_in_requires(python: Path, spec: dict, env: dict) -> dict[str, list[str]]:
    """Each stand-in's ``Requires-Dist``, from pip's dry run of it (nothing installed)."""
    out = {}
    for name in spec["stand_ins"]:
        items, _ = _pip_report(python, ["--no-deps", f"{name}=={colab_version(spec, name)}"], env)
        if items is not None:
            out[name] = [line for item in items for line in item["metadata"].get("requires_dist") or []]
    return out


def cell_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[tuple[list[str], bool]]:
    """What the first cell pip-installs after the course itself, as ``(requirements, no_deps)`` groups:
    :func:`bertfamily.install.install_requirements` on this working tree's ``pyproject.toml``."""
    from bertfamily import install  # imports no torch

    deps = toml_reader().loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    wanted = [d.split(";")[0].strip() for d in deps if install.name_of(d) != "torch"]
    return [
        ([r for r in wanted if install.name_of(r) not in install.FILES_ONLY], False),
        ([r for r in wanted if install.name_of(r) in install.FILES_ONLY], True),
    ]


def host_roots(spec: dict, groups: list[tuple[list[str], bool]]) -> list[str]:
    """The names the host starts from (at Colab's versions, with their dependencies): torch, the
    runner's packages, and every requirement of the first cell that Colab has."""
    from packaging.requirements import Requirement

    names = ["torch", *RUNNER_PACKAGES] + [normalise(Requirement(r).name) for reqs, _ in groups for r in reqs]
    return [n for n in dict.fromkeys(names) if n in spec["packages"]]


def dry_run(python: Path, requirements: list[str], env: dict, no_deps: bool = False) -> dict[str, str]:
    """What ``pip install`` of ``requirements`` would install or replace in ``python``'s environment
    (normalised name -> version), installing nothing (``--dry-run --report``)."""
    if not requirements:
        return {}
    items, error = _pip_report(python, [*(["--no-deps"] if no_deps else []), *requirements], env)
    if items is None:
        raise RuntimeError(f"pip's dry run of the first cell failed: {error[-600:]}")
    return {normalise(item["metadata"]["name"]): item["metadata"]["version"] for item in items}


def reachable(spec: dict, have: dict, would: dict) -> list[str]:
    """Packages of the manifest that the cell's pip would install (``would``) and the host lacks."""
    return sorted(n for n in would if n in spec["packages"] and n not in have)


def close_host(spec: dict, groups, have, would_install, add, rounds: int = ROUNDS) -> list[str]:
    """Add to the host, at Colab's versions, every package of the manifest that the first cell could
    touch: dry-run the cell (``would_install(requirements, no_deps)``), ``add(names)`` what it would
    install that Colab has and the host lacks, and again until nothing is left (``have()`` reads the
    host). Returns the names added, in order; a fixed point not reached in ``rounds`` is an error."""
    added = []
    for _ in range(rounds):
        current, would = have(), {}
        for requirements, no_deps in groups:
            would.update(would_install(requirements, no_deps))
        more = reachable(spec, current, would)
        if not more:
            return added
        add(more)
        added += more
    raise RuntimeError(f"the first cell's reach did not settle in {rounds} rounds (last added: {', '.join(more)})")


def installed(python: Path, env: dict) -> dict[str, str]:
    """Every distribution in ``python``'s environment, as ``pip freeze`` lists it: normalised name -> version."""
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))"
    )
    out = subprocess.run([str(python), "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return {normalise(k): v for k, v in json.loads(out).items()}


def replaced(names, before: dict, after: dict) -> list[str]:
    """Which of ``names`` a notebook's first cell replaced or removed, as ``"ipywidgets 7.7.1 -> 8.1.9"``."""
    return [f"{n} {before[n]} -> {after.get(n, 'removed')}" for n in names if n in before and after.get(n) != before[n]]


def added_otherwise(spec: dict, before: dict, after: dict) -> list[str]:
    """Packages of the manifest the host lacked that the cell added at another version than Colab's
    (on Colab, a replacement), as ``"scipy 1.16.3 -> 1.17.0 (Colab's, not installed here)"``."""
    return [
        f"{n} {colab_version(spec, n)} -> {after[n]} (Colab's, not installed here)"
        for n in sorted(set(after) - set(before))
        if n in spec["packages"] and after[n] != colab_version(spec, n)
    ]


def _pip_install(python: str, names: list[str], constraint: Path, env: dict, spec: dict) -> list[str]:
    """Install ``names`` under the constraints; what cannot be had on this Python is said, not faked."""
    if (
        not names
        or subprocess.run([python, "-m", "pip", "install", "-q", "-c", str(constraint), *names], env=env).returncode
        == 0
    ):
        return []
    missing = []
    for name in names:  # all at once failed: one at a time, to say which cannot be had here
        done = subprocess.run(
            [python, "-m", "pip", "install", "-q", "-c", str(constraint), name], env=env, capture_output=True, text=True
        )
        if done.returncode:
            why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "pip failed"
            missing.append(f"{name}=={colab_version(spec, name)} ({why})")
    return missing


def make_host(venv: Path, spec: dict, env: dict, groups=None) -> tuple[float, list, list, list, dict]:
    """The host venv (see the module's docstring); returns the seconds, the roots, what the dry runs
    added, what could not be installed here and the pins lifted for the stand-ins (all said)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    groups = cell_requirements() if groups is None else groups
    lifted = lifted_pins(spec, stand_in_requires(Path(python), spec, env))
    constraint = venv / "colab-constraints.txt"
    constraint.write_text("\n".join(constraints(spec, lifted)) + "\n", encoding="utf-8")
    roots = host_roots(spec, groups)
    missing = _pip_install(python, roots, constraint, env, spec)
    extra = close_host(
        spec,
        groups,
        lambda: installed(Path(python), env),
        lambda reqs, no_deps: dry_run(Path(python), reqs, env, no_deps),
        lambda names: missing.extend(_pip_install(python, names, constraint, env, spec)),
    )
    return time.perf_counter() - start, roots, extra, missing, lifted


def describe_host(
    spec: dict, missing: list[str], host: dict | None = None, roots=(), extra=(), lifted=None
) -> list[str]:
    """What the environment stands for, and where it differs from Colab's (printed before the run)."""
    src = spec["source"]
    lines = [
        f"Colab's package set: {src['name']}, snapshot of {src['snapshot']} ({len(spec['packages'])} packages)",
        f"  Python {src['python']} on Colab, {sys.version.split()[0]} here: the interpreter is not checked",
    ]
    lines += [
        f"  stand-in: {n} {v} for Colab's {spec['packages'][n]} ({why})" for n, (v, why) in spec["stand_ins"].items()
    ]
    lines += [f"  not pinned to Colab's version: {n} ({why})" for n, why in (lifted or {}).items()]
    if host is not None:
        present = sorted(n for n in spec["packages"] if n in host)
        lines.append(
            f"  installed here at Colab's versions: {len(present)} of its packages (from {', '.join(roots)}"
            + (f"; the first cell's dry run added {', '.join(extra)}" if extra else "")
            + "); the other "
            f"{len(spec['packages']) - len(present)} are out of the first cell's reach"
        )
        lines += [
            f"  differs from Colab's: {n} {host[n]} here, {colab_version(spec, n)} there"
            for n in present
            if host[n] != colab_version(spec, n) and n not in spec["stand_ins"] and n not in (lifted or {})
        ]
    lines += [f"  not installed here, so not checked: {m}" for m in missing]
    return lines
