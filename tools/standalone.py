"""Run every lesson the way a reader elsewhere does: alone in an empty folder, installed by its first cell.

    python -m tools.standalone [NB ...] [--binder] [--keep]      (make colab-check; CI runs it)
    python -m tools.standalone --manifest-from pip-freeze.txt --snapshot DATE --commit SHA --python X.Y.Z

from the repository root (``python tools/standalone.py ...`` there runs the same).

**Colab (default).** Colab's image ships some 640 packages; ``tools/colab-manifest.toml`` lists every
one of them with its version, copied from the image's published ``pip freeze`` (googlecolab/backend-info,
with the snapshot's date and commit; ``--manifest-from`` rewrites the file from a newer one). The
check fails when a notebook's first cell replaces or removes *any* package of that list, without
installing the hundreds of packages. It can, because ``pip install`` only ever changes the packages
in its own resolution: the requirements it was given and their dependencies. A package outside that
set is never replaced, never removed. So the check's virtual environment (the host) holds:

1. *what the course and the check need*, at Colab's versions: torch (the local 2.13.0 CPU wheel stands
   in for Colab's 2.11.0+cpu, and the output says so), pip, the kernel and the runner (ipykernel,
   nbclient, nbformat) and every runtime requirement of ``pyproject.toml`` that Colab has, each with its
   dependencies; pip installs them against a constraints file that pins every package of the
   manifest, so every dependency Colab has comes at Colab's version (but where the stand-in's own
   requirements rule a pin out: torch 2.13.0 needs ``setuptools>=77.0.3``, Colab has 75.2.0; such a
   pin is lifted, and the output says so);
2. *what the first cell could touch*: the cell's own ``pip install`` of the course's requirements is
   first run with ``--dry-run --report`` in the host; every package of the manifest that pip would
   install there and the host lacks is installed, again at Colab's version, and the dry run is
   repeated until it names no such package (a fixed point, a few rounds at most).

Then the host holds every package of Colab's list that the cell can reach, at Colab's version, and
the rest cannot be reached. Each notebook is copied alone into an empty folder and executed top to
bottom by a kernel of that environment, with no repository on ``sys.path`` and the working tree out
of reach. The kernel believes it is on Colab (an IPython start-up file puts a ``google.colab`` module
in ``sys.modules``), so the notebook's own first cell does the installing, verbatim: ``pip install
--no-deps git+<repository URL>`` and then the package's runtime requirements. The URL is the one of
``_config.yml``; git is told to fetch it from a snapshot of this working tree
(``url.<snapshot>.insteadOf``), so what is checked is what would be pushed, uncommitted edits
included. The first notebook installs; the others find the package installed, as in one Colab
session. What is installed (``importlib.metadata``, the list ``pip freeze`` prints) is read before
and after each notebook: a notebook fails when it raises, when its first cell replaced or removed a
package of the manifest that the host has, or when it added one of the manifest at another version
than Colab's (which on Colab would have been a replacement). Not checked: Colab's Python (3.13; the
host runs this machine's), where markers or wheels differ by Python version.

**Binder (``--binder``).** A fresh virtual environment from ``environment.yml``'s pip list (the
PyTorch CPU index line dropped: this machine is offline and has the wheel locally), then
``postBuild``'s ``pip install --no-deps -e .``, then every notebook executed where Binder opens it,
in a copy of the repository. Not checked here: conda itself, Python 3.11 and repo2docker.

Nothing in the repository is written (except by ``--manifest-from``). Exit status 1 when a notebook
fails; a table says why.
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:
    # `python tools/standalone.py` puts tools/ first on sys.path, not the repository that holds the
    # package: the command runs again as the module it is (python -m tools.standalone), from the root
    import os
    import sys
    if os.path.realpath(os.getcwd()) != os.path.dirname(os.path.dirname(os.path.realpath(__file__))):
        sys.exit("run it from the repository root: python -m tools.standalone ...")
    os.execv(sys.executable, [sys.executable, "-m", "tools.standalone", *sys.argv[1:]])

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools import nb as nbtools

ROOT = Path(__file__).resolve().parents[1]

#: What a Colab runtime already has, as far as this course is concerned: its versions, their source and date.
MANIFEST = ROOT / "tools" / "colab-manifest.toml"
#: Makes the kernel look like Colab's (``"google.colab" in sys.modules``), before any cell runs.
FAKE_COLAB = "import sys, types\nsys.modules.setdefault('google.colab', types.ModuleType('google.colab'))\n"
#: Environment variables passed to the reader's machine: pip's configuration (indexes, certificates)
#: and proxies; nothing else of this shell (no PYTHONPATH, no virtual environment).
PASSED = ("PIP_", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "SSL_CERT")

#: A cell that runs this long has stalled: every lesson runs in about a minute.
CELL_TIMEOUT = 300

RUNNER = r"""
import sys, time, nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError
path, timeout = sys.argv[1], int(sys.argv[2])
start = time.perf_counter()
stalled = None
for attempt in (1, 2):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": "."}})
    try:
        client.execute()
        error = None
    except CellTimeoutError as exc:
        # a cell that never ends, its kernel idle: seen after the interact cells of lessons 1 and 3
        # (issue 39), never under nbval.
        # Said in the report, and run once more in a fresh kernel; a second stall fails.
        lines = [l.strip() for l in str(exc).splitlines() if l.strip() and not set(l.strip()) <= set("-")]
        after = next((i + 1 for i, l in enumerate(lines) if l.startswith("Here is a preview")), len(lines))
        which = lines[after][:60] if after < len(lines) else "?"  # the cell's first line
        error = f"CellTimeoutError: a cell ran over {timeout} s twice ({which})"
        if attempt == 1:
            stalled = f"the cell that starts '{which}' ran over {timeout} s; the notebook ran again"
            continue
    except Exception as exc:
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    break
first = next(c for c in nb.cells if c.cell_type == "code")
text = "".join(o.get("text", "") for o in first.get("outputs", []) if o.get("output_type") == "stream")
import re
error = error and re.sub(r"\x1b\[[0-9;]*m", "", error)
print("RESULT", __import__("json").dumps({"seconds": time.perf_counter() - start, "error": error, "first_cell": text,
                                         "stalled": stalled}))
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def clean_env(home: Path, venv: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k.startswith(PASSED)}
    env.update(PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", HOME=str(home), LANG="C.UTF-8",
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **extra)
    return env


def snapshot(dest: Path) -> Path:
    """A git repository holding this working tree as it is (tracked and untracked, not ignored)."""
    dest.mkdir(parents=True)
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    ident = {"GIT_AUTHOR_NAME": "check", "GIT_AUTHOR_EMAIL": "check@localhost",
             "GIT_COMMITTER_NAME": "check", "GIT_COMMITTER_EMAIL": "check@localhost"}
    git_env = {**os.environ, **ident}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "snapshot"]):
        run(cmd, cwd=dest, env=git_env, stdout=subprocess.DEVNULL)
    return dest


def make_venv(venv: Path, packages: list[str], env: dict) -> float:
    start = time.perf_counter()
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *packages], env=env)
    return time.perf_counter() - start


def execute(python: Path, notebook: Path, cwd: Path, env: dict) -> dict:
    done = subprocess.run([str(python), "-c", RUNNER, notebook.name, str(CELL_TIMEOUT)], cwd=cwd, env=env,
                          text=True, capture_output=True)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        return {"seconds": 0.0, "error": f"runner failed: {done.stderr.strip()[-400:]}", "first_cell": ""}
    return json.loads(line[len("RESULT "):])


def report(stem: str, result: dict) -> None:
    """One notebook's line, and a second one where it stalled once and ran again."""
    print(f"  {stem:<24} {'ok' if not result['error'] else 'FAILED':<7} {result['seconds']:6.1f} s  "
          f"{result['error'] or ''}", flush=True)
    if result.get("stalled"):
        print(f"  {stem}: stalled once: {result['stalled']}", flush=True)


def first_cell_problems(result: dict, colab: bool) -> str | None:
    """What a reader would see wrong in the first cell's report, or None."""
    text = result["first_cell"]
    if colab and "colab: True" not in text:
        return "the kernel did not look like Colab's (first cell reports no 'colab: True')"
    if "pin() called after torch" in text:
        return "torch started before the kernels were pinned"
    return None


def normalise(name: str) -> str:
    """A project name as pip compares them (PEP 503): ``jupyter_client`` is ``jupyter-client``."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ------------------------------------------------------------------ the manifest: Colab's whole package list

def _toml():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib


def manifest(path: Path = MANIFEST) -> dict:
    """The manifest: ``source`` (name, url, file, commit, snapshot date, Python), ``packages`` (Colab's
    versions by normalised name: every package of its ``pip freeze``), ``direct`` (the URL of those
    installed from a URL) and ``stand_ins`` (name -> (version installed instead, why))."""
    data = _toml().loads(path.read_text(encoding="utf-8"))
    stand_ins = {normalise(k): (v["version"], v["why"]) for k, v in data.get("stand-ins", {}).items()}
    return {"source": data["source"], "packages": {normalise(k): v for k, v in data["packages"].items()},
            "direct": {normalise(k): v for k, v in data.get("direct", {}).items()}, "stand_ins": stand_ins}


#: A wheel's or an sdist's file name at the end of a direct reference: its version.
_ARCHIVE = re.compile(r"/(?P<name>[A-Za-z0-9_.]+)-(?P<version>[0-9][^-/]*?)(?:-[^/]*)?\.(?:whl|tar\.gz|zip)(?:#.*)?$")


def parse_freeze(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """``pip freeze``'s lines as ``(versions, direct)``, by name as written.

    ``name==version`` gives the version; ``name @ url`` gives the URL in ``direct`` and, where the URL
    ends in a wheel or an sdist, the version in its file name (``torch-2.11.0%2Bcpu-...whl``:
    ``2.11.0+cpu``); a git URL has no version to read (its name is in ``direct`` only).
    """
    from urllib.parse import unquote

    versions, direct = {}, {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if " @ " in line:
            name, url = (part.strip() for part in line.split(" @ ", 1))
            direct[name] = url
            found = _ARCHIVE.search(unquote(url))
            if found:
                versions[name] = found["version"]
        elif "==" in line:
            name, version = (part.strip() for part in line.split("==", 1))
            versions[name] = version
        else:
            raise ValueError(f"not a line of pip freeze: {line!r}")
    return versions, direct


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


MANIFEST_HEADER = """\
# What Google Colab's runtime ships: every package of the image's published `pip freeze`, with its
# version (googlecolab/backend-info, the file, commit and snapshot date below). `make colab-check`
# (tools/standalone.py) installs the ones a notebook's first cell can reach, at these versions, and
# fails when that cell replaces or removes any of them. pyproject.toml's requirements must admit
# them (tests/test_standalone.py checks it).
#
# To follow a newer Colab image, do not edit by hand: rewrite this file from the image's list,
#   python tools/standalone.py --manifest-from pip-freeze.txt --snapshot DATE --commit SHA --python X.Y.Z
# (the stand-ins are kept), then run `make colab-check`.
"""


def manifest_text(freeze: str, snapshot: str, commit: str, python: str, stand_ins: dict,
                  name: str = "googlecolab/backend-info", file: str = "pip-freeze.txt") -> str:
    """The manifest's text from a ``pip freeze`` of Colab's image (:func:`parse_freeze`), with its
    source, and ``stand_ins`` (name -> (version, why)) as they were."""
    versions, direct = parse_freeze(freeze)
    lines = [MANIFEST_HEADER, "[source]", f'name = "{name}"', f'url = "https://github.com/{name}"',
             f'file = "{file}"', f'commit = "{commit}"', f'snapshot = "{snapshot}"',
             "# Colab's Python. Not checked here: the check's environment runs this machine's Python.",
             f'python = "{python}"', "",
             f"# {len(set(versions) | set(direct))} packages: {len(versions)} with a version here, "
             f"{len(set(direct) - set(versions))} without one (a git URL: in [direct] only)",
             "[packages]"]
    lines += [f"{_key(n)} = {json.dumps(v)}" for n, v in sorted(versions.items(), key=lambda kv: normalise(kv[0]))]
    lines += ["", "# Installed from a URL, as the list names it (a git URL has no version to read).", "[direct]"]
    lines += [f"{_key(n)} = {json.dumps(u)}" for n, u in sorted(direct.items(), key=lambda kv: normalise(kv[0]))]
    lines += ["", "# What the check installs where Colab's own build cannot be had on this machine, and why.",
              "[stand-ins]"]
    lines += [f"{_key(n)} = {{ version = {json.dumps(v)}, why = {json.dumps(why)} }}"
              for n, (v, why) in stand_ins.items()]
    return "\n".join(lines) + "\n"


def write_manifest(freeze_path: Path, snapshot: str, commit: str, python: str, path: Path = MANIFEST) -> int:
    stand_ins = manifest(path)["stand_ins"] if path.is_file() else {}
    text = manifest_text(freeze_path.read_text(encoding="utf-8"), snapshot, commit, python, stand_ins)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}: {len(manifest(path)['packages'])} packages of Colab's image, snapshot of {snapshot}")
    return 0


# ------------------------------------------------------------------ the host: what the first cell can reach

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
            if name in spec["packages"] and name not in spec["stand_ins"] and \
                    not requirement.specifier.contains(spec["packages"][name], prereleases=True):
                out[name] = (f"Colab's {spec['packages'][name]}; the stand-in {standin} "
                             f"{colab_version(spec, standin)} needs {requirement.name}{requirement.specifier}")
    return out


def stand_in_requires(python: Path, spec: dict, env: dict) -> dict[str, list[str]]:
    """Each stand-in's ``Requires-Dist``, from pip's dry run of it (nothing installed)."""
    out = {}
    for name in spec["stand_ins"]:
        done = subprocess.run([str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
                               "--no-deps", f"{name}=={colab_version(spec, name)}"],
                              env=env, capture_output=True, text=True)
        if done.returncode == 0:
            items = json.loads(done.stdout)["install"]
            out[name] = [line for item in items for line in item["metadata"].get("requires_dist") or []]
    return out


def cell_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[tuple[list[str], bool]]:
    """What the first cell pip-installs after the course itself, as ``(requirements, no_deps)`` groups:
    :func:`bertfamily.install.install_requirements` on this working tree's ``pyproject.toml``."""
    from bertfamily import install  # imports no torch
    deps = _toml().loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    wanted = [d.split(";")[0].strip() for d in deps if install.name_of(d) != "torch"]
    return [([r for r in wanted if install.name_of(r) not in install.FILES_ONLY], False),
            ([r for r in wanted if install.name_of(r) in install.FILES_ONLY], True)]


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
    done = subprocess.run([str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
                           *(["--no-deps"] if no_deps else []), *requirements],
                          env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"pip's dry run of the first cell failed: {done.stderr.strip()[-600:]}")
    report = json.loads(done.stdout)
    return {normalise(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}


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
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))")
    out = subprocess.run([str(python), "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return {normalise(k): v for k, v in json.loads(out).items()}


def replaced(names, before: dict, after: dict) -> list[str]:
    """Which of ``names`` a notebook's first cell replaced or removed, as ``"ipywidgets 7.7.1 -> 8.1.9"``."""
    return [f"{n} {before[n]} -> {after.get(n, 'removed')}" for n in names if n in before and after.get(n) != before[n]]


def added_otherwise(spec: dict, before: dict, after: dict) -> list[str]:
    """Packages of the manifest the host lacked that the cell added at another version than Colab's
    (on Colab, a replacement), as ``"scipy 1.16.3 -> 1.17.0 (Colab's, not installed here)"``."""
    return [f"{n} {colab_version(spec, n)} -> {after[n]} (Colab's, not installed here)"
            for n in sorted(set(after) - set(before)) if n in spec["packages"] and after[n] != colab_version(spec, n)]


def colab_verdict(result: dict, changed: list[str]) -> str | None:
    """Why a notebook failed on Colab, or None: it raised, its first cell's report is wrong, or that
    cell replaced what Colab has (``changed``, from :func:`replaced` and :func:`added_otherwise`)."""
    if result["error"] or first_cell_problems(result, colab=True):
        return result["error"] or first_cell_problems(result, colab=True)
    return "replaced what Colab has: " + ", ".join(changed) if changed else None


def _pip_install(python: str, names: list[str], constraint: Path, env: dict, spec: dict) -> list[str]:
    """Install ``names`` under the constraints; what cannot be had on this Python is said, not faked."""
    if not names or subprocess.run([python, "-m", "pip", "install", "-q", "-c", str(constraint), *names],
                                   env=env).returncode == 0:
        return []
    missing = []
    for name in names:  # all at once failed: one at a time, to say which cannot be had here
        done = subprocess.run([python, "-m", "pip", "install", "-q", "-c", str(constraint), name], env=env,
                              capture_output=True, text=True)
        if done.returncode:
            why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "pip failed"
            missing.append(f"{name}=={colab_version(spec, name)} ({why})")
    return missing


def make_host(venv: Path, spec: dict, env: dict, groups=None) -> tuple[float, list, list, list, dict]:
    """The host venv (see the module's docstring); returns the seconds, the roots, what the dry runs
    added, what could not be installed here and the pins lifted for the stand-ins (all said)."""
    start = time.perf_counter()
    run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    groups = cell_requirements() if groups is None else groups
    lifted = lifted_pins(spec, stand_in_requires(Path(python), spec, env))
    constraint = venv / "colab-constraints.txt"
    constraint.write_text("\n".join(constraints(spec, lifted)) + "\n", encoding="utf-8")
    roots = host_roots(spec, groups)
    missing = _pip_install(python, roots, constraint, env, spec)
    extra = close_host(spec, groups, lambda: installed(Path(python), env),
                       lambda reqs, no_deps: dry_run(Path(python), reqs, env, no_deps),
                       lambda names: missing.extend(_pip_install(python, names, constraint, env, spec)))
    return time.perf_counter() - start, roots, extra, missing, lifted


def describe_host(spec: dict, missing: list[str], host: dict | None = None, roots=(), extra=(),
                  lifted=None) -> list[str]:
    """What the environment stands for, and where it differs from Colab's (printed before the run)."""
    src = spec["source"]
    lines = [f"Colab's package set: {src['name']}, snapshot of {src['snapshot']} ({len(spec['packages'])} packages)",
             f"  Python {src['python']} on Colab, {sys.version.split()[0]} here: the interpreter is not checked"]
    lines += [f"  stand-in: {n} {v} for Colab's {spec['packages'][n]} ({why})"
              for n, (v, why) in spec["stand_ins"].items()]
    lines += [f"  not pinned to Colab's version: {n} ({why})" for n, why in (lifted or {}).items()]
    if host is not None:
        present = sorted(n for n in spec["packages"] if n in host)
        lines.append(f"  installed here at Colab's versions: {len(present)} of its packages (from {', '.join(roots)}"
                     + (f"; the first cell's dry run added {', '.join(extra)}" if extra else "") + "); the other "
                     f"{len(spec['packages']) - len(present)} are out of the first cell's reach")
        lines += [f"  differs from Colab's: {n} {host[n]} here, {colab_version(spec, n)} there"
                  for n in present if host[n] != colab_version(spec, n) and n not in spec["stand_ins"]
                  and n not in (lifted or {})]
    lines += [f"  not installed here, so not checked: {m}" for m in missing]
    return lines


def colab(notebooks: list[Path], work: Path) -> list[tuple[str, dict]]:
    url = nbtools.repository_url()
    repo = snapshot(work / "repository")
    home, ipython = work / "home", work / "ipython"
    (ipython / "profile_default" / "startup").mkdir(parents=True)
    (ipython / "profile_default" / "startup" / "00-colab.py").write_text(FAKE_COLAB, encoding="utf-8")
    home.mkdir()
    gitconfig = work / "gitconfig"
    gitconfig.write_text(f'[url "file://{repo}"]\n\tinsteadOf = {url}\n', encoding="utf-8")
    venv = work / "venv"
    env = clean_env(home, venv, IPYTHONDIR=str(ipython), GIT_CONFIG_GLOBAL=str(gitconfig), GIT_CONFIG_NOSYSTEM="1")
    spec = manifest()
    seconds, roots, extra, missing, lifted = make_host(venv, spec, env)
    python = venv / "bin" / "python"
    state = installed(python, env)
    print("\n".join(describe_host(spec, missing, state, roots, extra, lifted)), flush=True)
    print(f"Colab-like environment built in {seconds:.0f} s; {url} is fetched from a snapshot of this working tree",
          flush=True)
    results = []
    for path in notebooks:
        folder = work / "readers" / path.stem
        folder.mkdir(parents=True)
        shutil.copy2(path, folder / path.name)
        result = execute(python, folder / path.name, folder, env)
        after = installed(python, env)
        changed = replaced(spec["packages"], state, after) + added_otherwise(spec, state, after)
        added = sorted(set(after) - set(state))
        if added:
            print(f"  {path.stem}: its first cell added {len(added)} packages: {', '.join(added)}", flush=True)
        state = after
        result["error"] = colab_verdict(result, changed)
        results.append((path.stem, result))
        report(path.stem, result)
    return results


def binder_requirements() -> list[str]:
    import yaml
    spec = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
    return [line for line in pip if not line.startswith("--extra-index-url")]


def binder(notebooks: list[Path], work: Path) -> list[tuple[str, dict]]:
    repo = snapshot(work / "repository")
    home, venv = work / "home", work / "venv"
    home.mkdir()
    env = clean_env(home, venv)
    seconds = make_venv(venv, binder_requirements() + ["nbclient", "nbformat"], env)
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "-e", "."], cwd=repo, env=env)
    print(f"Binder-like environment (environment.yml's pip list, then postBuild) built in {seconds:.0f} s", flush=True)
    results = []
    for path in notebooks:
        rel = path.relative_to(ROOT)
        result = execute(venv / "bin" / "python", repo / rel, (repo / rel).parent, env)
        result["error"] = result["error"] or first_cell_problems(result, colab=False)
        results.append((path.stem, result))
        report(path.stem, result)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: every notebook of _toc.yml)")
    parser.add_argument("--binder", action="store_true", help="an environment from environment.yml + postBuild instead")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    parser.add_argument("--manifest-from", type=Path, metavar="PIP_FREEZE",
                        help="rewrite tools/colab-manifest.toml from Colab's published pip freeze (and exit)")
    parser.add_argument("--snapshot", help="with --manifest-from: the snapshot's date (YYYY-MM-DD)")
    parser.add_argument("--commit", help="with --manifest-from: the commit of googlecolab/backend-info")
    parser.add_argument("--python", help="with --manifest-from: Colab's Python (its os-info.txt)")
    args = parser.parse_args(argv)
    if args.manifest_from:
        if not (args.snapshot and args.commit and args.python):
            parser.error("--manifest-from needs --snapshot, --commit and --python")
        return write_manifest(args.manifest_from, args.snapshot, args.commit, args.python)
    notebooks = [Path(p).resolve() for p in args.notebooks] or nbtools.toc_notebooks()
    bad = [str(p) for p in notebooks if p.suffix != ".ipynb" or not p.is_file() or ROOT not in p.parents]
    if bad:
        parser.error(f"not notebooks of this repository (.ipynb): {', '.join(bad)}")
    work = Path(tempfile.mkdtemp(prefix="bertfamily-standalone-"))
    start = time.perf_counter()
    try:
        results = (binder if args.binder else colab)(notebooks, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    failed = [name for name, r in results if r["error"]]
    print(f"{len(results) - len(failed)} of {len(results)} notebooks ran standalone "
          f"({'Binder' if args.binder else 'Colab'}-like) in {time.perf_counter() - start:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
