"""The course's website without the exercise's solutions (``make book-public``).

    python -m tools.public_book [--out _build/public]      (or python tools/public_book.py)

builds the website from a copy of the book's sources in which the exercise notebook is its
solution-free version (:func:`bertfamily.grading.student.student_version` with ``website=True``: the
tasks and the course's code, every solution a placeholder, the solution dropdowns and the note that
points at them dropped, no outputs). So the pages, the ``.ipynb`` download, ``_sources`` and the
search index are made from a notebook that never held a solution. The exercise page has no launch
buttons (Binder, Colab, Live Code): they would open the notebook of the repository that
``_config.yml`` names, which is the reference. The build then reads every file it wrote
(:func:`leaks`) and fails if any holds a line of a solution, or a name that only the solutions use.

The website lands in OUT/_build/html (default ``_build/public/_build/html``); OUT is replaced.
This file is also the Sphinx extension that drops the exercise page's launch buttons.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = "book/exercise_distilbert"
#: What the website is made of (everything else of the repository stays out of the copy).
SOURCES = ("_config.yml", "_toc.yml", "_static", "book")
#: Lines shorter than this, or names shorter than this, are too common to say that a solution leaked.
MIN_LINE, MIN_NAME = 16, 5


# ---------------------------------------------------------------- the Sphinx extension


def _drop_launch_buttons(app, pagename, templatename, context, doctree):
    if pagename == EXERCISE and "header_buttons" in context:
        context["header_buttons"] = [b for b in context["header_buttons"] if b.get("label") != "launch-buttons"]
        context["use_thebe"] = False


def setup(app):
    app.connect("html-page-context", _drop_launch_buttons, priority=900)  # after the theme's (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# ---------------------------------------------------------------- what a solution is


def _code_lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]


def _prose_lines(source: str) -> list[str]:
    return [
        line.strip()
        for line in source.splitlines()
        if line.strip() and not re.match(r"^[`:]{3,}|^:\w[\w-]*:", line.strip())
    ]


def _text_of_notebook(nb) -> str:
    parts = []
    for cell in nb.cells:
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") if isinstance(output.get("text"), str) else "")
            parts.extend(v for v in output.get("data", {}).values() if isinstance(v, str))
    return "\n".join(parts)


def public_sources_text(root: Path = ROOT) -> str:
    """Everything the public website is made of, as text: every page of the book but the exercise, and
    the exercise's solution-free version."""
    import nbformat

    from bertfamily.grading.student import student_version

    texts = []
    for path in sorted((root / "book").rglob("*")):
        if path.suffix == ".md" or path.suffix == ".bib":
            texts.append(path.read_text(encoding="utf-8"))
        elif path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            if path.with_suffix("") == root / EXERCISE:
                nb = student_version(nb, website=True)
            texts.append(_text_of_notebook(nb))
    return "\n".join(texts)


def solution_needles(reference, public_text: str) -> tuple[list[str], list[str]]:
    """What would show that a solution leaked: (its lines, its names) that the public sources do not hold.

    The lines: every line of code of a solution code cell (comments aside; the instructions at the top
    of each stay on the page) and every line of prose of a solution markdown cell, at least MIN_LINE
    characters long. The names: identifiers of at least MIN_NAME characters that the solutions use and
    no public source does (the search index keeps words, not lines)."""
    from bertfamily.grading.student import SOLUTION, SOLUTIONS_NOTE, cell_tags

    lines, names = [], set()
    public_words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", public_text))
    for cell in reference.cells:
        tags = cell_tags(cell)
        if SOLUTION not in tags and SOLUTIONS_NOTE not in tags:
            continue
        found = _code_lines(cell.source) if cell.cell_type == "code" else _prose_lines(cell.source)
        lines += [line for line in found if len(line) >= MIN_LINE and line not in public_text]
        if cell.cell_type == "code":
            code = "\n".join(found)
            code = re.sub(r"(\"[^\"\n]*\"|'[^'\n]*')", " ", code)  # names, not words inside strings
            names |= {
                w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code) if len(w) >= MIN_NAME and w not in public_words
            }
    return sorted(set(lines)), sorted(names)


def _file_text(path: Path) -> str:
    """A built file as a reader (or a search) sees its text: a notebook's sources and outputs, a page's
    text without its tags (the highlighted code's spans put back together), anything else as it is."""
    raw = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        import nbformat

        try:
            return _text_of_notebook(nbformat.reads(raw, as_version=4))
        except Exception:  # not a notebook after all: read as it is
            return raw
    if path.suffix in (".html", ".htm"):
        return html.unescape(re.sub(r"<[^>]+>", "", raw))
    return raw


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def leaks(site: Path, reference) -> list[str]:
    """Every file of ``site`` that holds a line of a solution or a name only the solutions use, with
    what it holds (empty: no solution text anywhere)."""
    lines, names = solution_needles(reference, public_sources_text())
    squash = re.compile(r"\s+")
    lines = [squash.sub(" ", line) for line in lines]
    found = []
    for path in sorted(p for p in Path(site).rglob("*") if p.is_file()):
        if path.suffix in (".png", ".jpg", ".jpeg", ".gif", ".woff", ".woff2", ".ttf", ".eot", ".ico"):
            continue
        text = _file_text(path)
        flat = squash.sub(" ", text)
        hits = [line for line in lines if line in flat]
        theirs = "_static" in path.relative_to(site).parts  # the theme's scripts use words of their own
        hits += [] if theirs else sorted(set(names) & _words(text))
        if hits:
            found.append(
                f"{path.relative_to(site)}: {', '.join(repr(h) for h in hits[:5])}"
                + (f" and {len(hits) - 5} more" if len(hits) > 5 else "")
            )
    return found


# ---------------------------------------------------------------- the build


def stage(out: Path) -> Path:
    """A copy of the book's sources in OUT/source, the exercise solution-free; returns its folder."""
    import nbformat
    import yaml

    from bertfamily.grading.student import student_version

    source = out / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        else:
            shutil.copy2(ROOT / name, source / name)
    exercise = source / f"{EXERCISE}.ipynb"
    nbformat.write(student_version(nbformat.read(exercise, as_version=4), website=True), exercise)
    config = yaml.safe_load((source / "_config.yml").read_text(encoding="utf-8"))
    sphinx = config.setdefault("sphinx", {})
    sphinx.setdefault("local_extensions", {})["public_book"] = str(Path(__file__).resolve().parent)
    (source / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return source


def build(out: Path, strict: bool = False) -> Path:
    """Build the solution-free website into OUT/_build/html and check it; returns the html folder."""
    import nbformat

    out = Path(out).resolve()
    if out == ROOT or ROOT.is_relative_to(out) or out.is_relative_to(ROOT / "book"):
        raise ValueError(f"--out {out} would replace the course's own sources: choose a folder of its own")
    shutil.rmtree(out, ignore_errors=True)
    source = stage(out)
    jb = Path(sys.executable).with_name("jupyter-book")
    command = [str(jb), "build", str(source), "--path-output", str(out), "--keep-going", *(["-W", "-n"] * strict)]
    done = subprocess.run(command)
    site = out / "_build" / "html"
    if done.returncode != 0 or not (site / "index.html").is_file():
        raise RuntimeError(f"the solution-free website did not build (exit status {done.returncode})")
    shutil.rmtree(out / "_build" / ".doctrees", ignore_errors=True)
    found = leaks(out / "_build", nbformat.read(ROOT / f"{EXERCISE}.ipynb", as_version=4))  # html and the rest
    if found:
        raise RuntimeError("solution text in the solution-free website:\n" + "\n".join(found))
    return site


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Build the website without the exercise's solutions.")
    parser.add_argument(
        "--out", default=str(ROOT / "_build" / "public"), help="the folder to build in (replaced; default %(default)s)"
    )
    parser.add_argument("--strict", action="store_true", help="warnings are errors (as the tests build)")
    args = parser.parse_args(argv)
    try:
        site = build(Path(args.out), strict=args.strict)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    files = sum(1 for p in site.rglob("*") if p.is_file())
    print(f"The website without the solutions: {site / 'index.html'} (no solution text in any of its {files} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
