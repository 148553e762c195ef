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
The manifest is read and rewritten by :mod:`tools.colab_manifest`, the host built by
:mod:`tools.colab_host`; this module runs the notebooks and judges them.

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
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools import nb as nbtools
from tools.colab_host import added_otherwise, describe_host, installed, make_host, replaced
from tools.colab_manifest import manifest, write_manifest
from tools.nb import ROOT

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
    env.update(
        PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        HOME=str(home),
        LANG="C.UTF-8",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        **extra,
    )
    return env


def snapshot(dest: Path) -> Path:
    """A git repository holding this working tree as it is (tracked and untracked, not ignored)."""
    dest.mkdir(parents=True)
    names = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, names):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    ident = {
        "GIT_AUTHOR_NAME": "check",
        "GIT_AUTHOR_EMAIL": "check@localhost",
        "GIT_COMMITTER_NAME": "check",
        "GIT_COMMITTER_EMAIL": "check@localhost",
    }
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
    done = subprocess.run(
        [str(python), "-c", RUNNER, notebook.name, str(CELL_TIMEOUT)], cwd=cwd, env=env, text=True, capture_output=True
    )
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        return {"seconds": 0.0, "error": f"runner failed: {done.stderr.strip()[-400:]}", "first_cell": ""}
    return json.loads(line[len("RESULT ") :])


def report(stem: str, result: dict) -> None:
    """One notebook's line, and a second one where it stalled once and ran again."""
    print(
        f"  {stem:<24} {'ok' if not result['error'] else 'FAILED':<7} {result['seconds']:6.1f} s  "
        f"{result['error'] or ''}",
        flush=True,
    )
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


def colab_verdict(result: dict, changed: list[str]) -> str | None:
    """Why a notebook failed on Colab, or None: it raised, its first cell's report is wrong, or that
    cell replaced what Colab has (``changed``, from :func:`replaced` and :func:`added_otherwise`)."""
    if result["error"] or first_cell_problems(result, colab=True):
        return result["error"] or first_cell_problems(result, colab=True)
    return "replaced what Colab has: " + ", ".join(changed) if changed else None


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
    print(
        f"Colab-like environment built in {seconds:.0f} s; {url} is fetched from a snapshot of this working tree",
        flush=True,
    )
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
    parser.add_argument(
        "--manifest-from",
        type=Path,
        metavar="PIP_FREEZE",
        help="rewrite tools/colab-manifest.toml from Colab's published pip freeze (and exit)",
    )
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
    print(
        f"{len(results) - len(failed)} of {len(results)} notebooks ran standalone "
        f"({'Binder' if args.binder else 'Colab'}-like) in {time.perf_counter() - start:.0f} s"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
