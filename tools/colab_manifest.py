"""Colab's whole package set, named in one file: ``tools/colab-manifest.toml``.

Every package of the published ``pip freeze`` of Colab's image (googlecolab/backend-info), with its
version, the snapshot's source, commit and date, and the stand-ins the check installs where Colab's
own build cannot be had here. :func:`manifest` reads the file; :func:`write_manifest` rewrites it
from a newer freeze (``python -m tools.standalone --manifest-from ...``), keeping the stand-ins.
``make colab-check`` (:mod:`tools.standalone`) installs what a first cell can reach at these versions
(:mod:`tools.colab_host`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tools.nb import ROOT

#: What a Colab runtime already has, as far as this course is concerned: its versions, their source and date.
MANIFEST = ROOT / "tools" / "colab-manifest.toml"


def normalise(name: str) -> str:
    """A project name as pip compares them (PEP 503): ``jupyter_client`` is ``jupyter-client``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def toml_reader():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib


def manifest(path: Path = MANIFEST) -> dict:
    """The manifest: ``source`` (name, url, file, commit, snapshot date, Python), ``packages`` (Colab's
    versions by normalised name: every package of its ``pip freeze``), ``direct`` (the URL of those
    installed from a URL) and ``stand_ins`` (name -> (version installed instead, why))."""
    data = toml_reader().loads(path.read_text(encoding="utf-8"))
    stand_ins = {normalise(k): (v["version"], v["why"]) for k, v in data.get("stand-ins", {}).items()}
    return {
        "source": data["source"],
        "packages": {normalise(k): v for k, v in data["packages"].items()},
        "direct": {normalise(k): v for k, v in data.get("direct", {}).items()},
        "stand_ins": stand_ins,
    }


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


def manifest_text(
    freeze: str,
    snapshot: str,
    commit: str,
    python: str,
    stand_ins: dict,
    name: str = "googlecolab/backend-info",
    file: str = "pip-freeze.txt",
) -> str:
    """The manifest's text from a ``pip freeze`` of Colab's image (:func:`parse_freeze`), with its
    source, and ``stand_ins`` (name -> (version, why)) as they were."""
    versions, direct = parse_freeze(freeze)
    lines = [
        MANIFEST_HEADER,
        "[source]",
        f'name = "{name}"',
        f'url = "https://github.com/{name}"',
        f'file = "{file}"',
        f'commit = "{commit}"',
        f'snapshot = "{snapshot}"',
        "# Colab's Python. Not checked here: the check's environment runs this machine's Python.",
        f'python = "{python}"',
        "",
        f"# {len(set(versions) | set(direct))} packages: {len(versions)} with a version here, "
        f"{len(set(direct) - set(versions))} without one (a git URL: in [direct] only)",
        "[packages]",
    ]
    lines += [f"{_key(n)} = {json.dumps(v)}" for n, v in sorted(versions.items(), key=lambda kv: normalise(kv[0]))]
    lines += ["", "# Installed from a URL, as the list names it (a git URL has no version to read).", "[direct]"]
    lines += [f"{_key(n)} = {json.dumps(u)}" for n, u in sorted(direct.items(), key=lambda kv: normalise(kv[0]))]
    lines += [
        "",
        "# What the check installs where Colab's own build cannot be had on this machine, and why.",
        "[stand-ins]",
    ]
    lines += [
        f"{_key(n)} = {{ version = {json.dumps(v)}, why = {json.dumps(why)} }}" for n, (v, why) in stand_ins.items()
    ]
    return "\n".join(lines) + "\n"


def write_manifest(freeze_path: Path, snapshot: str, commit: str, python: str, path: Path = MANIFEST) -> int:
    stand_ins = manifest(path)["stand_ins"] if path.is_file() else {}
    text = manifest_text(freeze_path.read_text(encoding="utf-8"), snapshot, commit, python, stand_ins)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}: {len(manifest(path)['packages'])} packages of Colab's image, snapshot of {snapshot}")
    return 0
