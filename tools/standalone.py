"""Run every lesson the way a reader elsewhere does: alone in an empty folder, installed by its first cell.

    python tools/standalone.py [NB ...] [--binder] [--keep]      (make colab-check; CI runs it)

**Colab (default).** A fresh virtual environment holds what a Colab runtime brings that matters
here, at Colab's versions: the packages of ``tools/colab-manifest.toml`` (one file, with its source
and date), where torch is the local 2.13.0 CPU wheel standing in for Colab's 2.11.0; a package that
cannot be installed on this Python is said, not faked. Each notebook is copied alone into an empty
folder and executed top to bottom by a kernel of that environment, with no repository on
``sys.path`` and the working tree out of reach. The kernel believes it is on Colab
(an IPython start-up file puts a ``google.colab`` module in ``sys.modules``), so the notebook's own
first cell does the installing, verbatim: ``pip install --no-deps git+<repository URL>`` and then
the package's runtime requirements. The URL is the one of ``_config.yml``; git is told to fetch it
from a snapshot of this working tree (``url.<snapshot>.insteadOf``), so what is checked is what
would be pushed, uncommitted edits included. The first notebook installs; the others find the
package installed, as in one Colab session. A notebook fails when it raises, or when its first cell
replaced or removed a package of the manifest (what Colab has must be kept).

**Binder (``--binder``).** A fresh virtual environment from ``environment.yml``'s pip list (the
PyTorch CPU index line dropped: this machine is offline and has the wheel locally), then
``postBuild``'s ``pip install --no-deps -e .``, then every notebook executed where Binder opens it,
in a copy of the repository. Not checked here: conda itself, Python 3.11 and repo2docker.

Nothing in the repository is written. Exit status 1 when a notebook fails; a table says why.
"""
from __future__ import annotations

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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nb as nbtools  # noqa: E402

#: What a Colab runtime already has, as far as this course is concerned: its versions, their source and date.
MANIFEST = ROOT / "tools" / "colab-manifest.toml"
#: Makes the kernel look like Colab's (``"google.colab" in sys.modules``), before any cell runs.
FAKE_COLAB = "import sys, types\nsys.modules.setdefault('google.colab', types.ModuleType('google.colab'))\n"
#: Environment variables passed to the reader's machine: pip's configuration (indexes, certificates)
#: and proxies; nothing else of this shell (no PYTHONPATH, no virtual environment).
PASSED = ("PIP_", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "SSL_CERT")

RUNNER = r"""
import sys, time, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
start = time.perf_counter()
try:
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
    error = None
except Exception as exc:
    error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
first = next(c for c in nb.cells if c.cell_type == "code")
text = "".join(o.get("text", "") for o in first.get("outputs", []) if o.get("output_type") == "stream")
import re
error = error and re.sub(r"\x1b\[[0-9;]*m", "", error)
print("RESULT", __import__("json").dumps({"seconds": time.perf_counter() - start, "error": error, "first_cell": text}))
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
    done = subprocess.run([str(python), "-c", RUNNER, notebook.name], cwd=cwd, env=env, text=True,
                          capture_output=True)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        return {"seconds": 0.0, "error": f"runner failed: {done.stderr.strip()[-400:]}", "first_cell": ""}
    return json.loads(line[len("RESULT "):])


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


def manifest(path: Path = MANIFEST) -> dict:
    """The manifest: ``source`` (name, url, snapshot date, Python), ``packages`` (Colab's versions by
    normalised name) and ``stand_ins`` (name -> (version installed instead, why))."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    stand_ins = {normalise(k): (v["version"], v["why"]) for k, v in data.get("stand-ins", {}).items()}
    return {"source": data["source"], "packages": {normalise(k): v for k, v in data["packages"].items()},
            "stand_ins": stand_ins}


def host_requirements(spec: dict) -> list[str]:
    """``name==version`` for every package of the manifest, a stand-in's version where it has one."""
    return [f"{name}=={spec['stand_ins'].get(name, (version,))[0]}" for name, version in spec["packages"].items()]


def installed(python: Path, env: dict) -> dict[str, str]:
    """Every distribution in ``python``'s environment: normalised name -> version."""
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))")
    out = subprocess.run([str(python), "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return {normalise(k): v for k, v in json.loads(out).items()}


def replaced(names, before: dict, after: dict) -> list[str]:
    """Which of ``names`` a notebook's first cell replaced or removed, as ``"ipywidgets 7.7.1 -> 8.1.9"``."""
    return [f"{n} {before[n]} -> {after.get(n, 'removed')}" for n in names if n in before and after.get(n) != before[n]]


def colab_verdict(result: dict, changed: list[str]) -> str | None:
    """Why a notebook failed on Colab, or None: it raised, its first cell's report is wrong, or that
    cell replaced what Colab has (``changed``, from :func:`replaced`)."""
    if result["error"] or first_cell_problems(result, colab=True):
        return result["error"] or first_cell_problems(result, colab=True)
    return "replaced what Colab has: " + ", ".join(changed) if changed else None


def make_host(venv: Path, spec: dict, env: dict) -> tuple[float, list[str]]:
    """A venv with the manifest's packages; returns the seconds and what could not be installed (said)."""
    start = time.perf_counter()
    run([sys.executable, "-m", "venv", str(venv)])
    python, wanted, missing = str(venv / "bin" / "python"), host_requirements(spec), []
    if subprocess.run([python, "-m", "pip", "install", "-q", *wanted], env=env).returncode:
        for requirement in wanted:  # all at once failed: one at a time, to say which cannot be had here
            done = subprocess.run([python, "-m", "pip", "install", "-q", requirement], env=env,
                                  capture_output=True, text=True)
            if done.returncode:
                why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "pip failed"
                missing.append(f"{requirement} ({why})")
    return time.perf_counter() - start, missing


def describe_host(spec: dict, missing: list[str]) -> list[str]:
    """What the environment stands for, and where it differs from Colab's (printed before the run)."""
    src = spec["source"]
    lines = [f"Colab's package set: {src['name']}, snapshot of {src['snapshot']} ({len(spec['packages'])} packages)",
             f"  Python {src['python']} on Colab, {sys.version.split()[0]} here: the interpreter is not checked"]
    lines += [f"  stand-in: {n} {v} for Colab's {spec['packages'][n]} ({why})"
              for n, (v, why) in spec["stand_ins"].items()]
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
    seconds, missing = make_host(venv, spec, env)
    print("\n".join(describe_host(spec, missing)), flush=True)
    python = venv / "bin" / "python"
    state = installed(python, env)
    print(f"Colab-like environment built in {seconds:.0f} s; {url} is fetched from a snapshot of this working tree",
          flush=True)
    results = []
    for path in notebooks:
        folder = work / "readers" / path.stem
        folder.mkdir(parents=True)
        shutil.copy2(path, folder / path.name)
        result = execute(python, folder / path.name, folder, env)
        after = installed(python, env)
        changed = replaced(spec["packages"], state, after)
        added = sorted(set(after) - set(state))
        if added:
            print(f"  {path.stem}: its first cell added {len(added)} packages: {', '.join(added)}", flush=True)
        state = after
        result["error"] = colab_verdict(result, changed)
        results.append((path.stem, result))
        print(f"  {path.stem:<24} {'ok' if not result['error'] else 'FAILED':<7} {result['seconds']:6.1f} s  "
              f"{result['error'] or ''}", flush=True)
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
        print(f"  {path.stem:<24} {'ok' if not result['error'] else 'FAILED':<7} {result['seconds']:6.1f} s  "
              f"{result['error'] or ''}", flush=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: every notebook of _toc.yml)")
    parser.add_argument("--binder", action="store_true", help="an environment from environment.yml + postBuild instead")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = parser.parse_args(argv)
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
