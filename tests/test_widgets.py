"""The lessons' widgets under ipywidgets 8 (this environment) and 7.7.1 (Colab's, issue 31).

(Lessons 1-3's sliders and calculator are browser widgets now, ``bertfamily.widgets``, tested in
Chromium by tests/test_browser_widgets.py and on the website by tests/test_browser.py; what is
below covers the widgets that still need a kernel.)

Every code cell of a lesson that uses ipywidgets is executed in a fresh process, as written, with
the interactive callbacks switched off: what runs is the widget-building code (the sliders and
drop-downs, `interact`), whose API is what differs between ipywidgets 7 and 8. The controls it
builds (kind, label, value, range, options) must be the same under both, and their state must
serialise as nbclient stores it for the website (`embed_data`).

What this proves: the lessons' widget code builds the same controls with Colab's ipywidgets 7.7.1
as with 8. What it does not: that Colab's front end draws them (no browser runs Colab's here), or
the callbacks, which need the lesson's state: nbval runs them under 8 (`make test`), and
`make colab-check` runs every lesson on Colab's package set, ipywidgets 7.7.1 included.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools import nb as nbtools

ROOT = Path(__file__).resolve().parents[1]

#: Colab's ipywidgets and what it needs beyond this environment (its own widgetsnbextension and
#: jupyterlab_widgets: those of ipywidgets 8 do not fit it).
COLAB_WIDGETS = ["ipywidgets==7.7.1", "widgetsnbextension~=3.6.0", "jupyterlab_widgets~=1.1", "ipython_genutils~=0.2.0"]

BUILD = r"""
import json, sys
import nbformat, ipywidgets
from ipywidgets import interactive
from ipywidgets.embed import embed_data
built = []
original = interactive.__init__
def record(self, *args, **kwargs):
    original(self, *args, **kwargs)
    built.append(self)
interactive.__init__ = record
interactive.update = lambda self, *args: None  # the callbacks need the lesson's state: not run here
out = []
for path, index in json.loads(sys.argv[1]):
    source = nbformat.read(path, as_version=4).cells[index].source
    before = len(built)
    exec(compile(source, f"{path} cell {index}", "exec"), {"__name__": "__main__"})
    for w in built[before:]:
        controls = []
        for c in w.kwargs_widgets:
            keys = [k for k in ("description", "value", "min", "max", "step", "options") if c.has_trait(k)]
            controls.append([type(c).__name__] + [[k, list(v) if isinstance(v, tuple) else v]
                                                  for k, v in ((k, getattr(c, k)) for k in keys)])
        state = embed_data(views=[w])["manager_state"]["state"]
        out.append({"cell": f"{path.split('/')[-1]}:{index}", "controls": controls, "models": len(state)})
print("RESULT", json.dumps({"version": ipywidgets.__version__, "widgets": out}))
"""


def widget_cells() -> list[tuple[str, int]]:
    import nbformat

    found = []
    for path in nbtools.toc_notebooks():
        nb = nbformat.read(path, as_version=4)
        found += [(str(path), i) for i, c in enumerate(nb.cells) if c.cell_type == "code" and "ipywidgets" in c.source]
    return found


def build(cells, pythonpath=None) -> dict:
    env = dict(os.environ, MPLBACKEND="Agg")
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", BUILD, json.dumps(cells)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert done.returncode == 0 and line, done.stderr[-3000:]
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def colab_widgets(tmp_path_factory):
    target = tmp_path_factory.mktemp("ipywidgets7")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), *COLAB_WIDGETS],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode:
        pytest.skip(f"ipywidgets 7.7.1 could not be installed here (no package index?): {done.stderr[-300:]}")
    return target


def browser_widget_cells() -> dict[str, list[str]]:
    """The cells of each lesson that show a widget computing in the browser (``bertfamily.widgets``)."""
    import nbformat

    found = {}
    for path in nbtools.toc_notebooks():
        nb = nbformat.read(path, as_version=4)
        for c in nb.cells:
            if c.cell_type == "code" and "bertfamily.widgets" in c.source:
                found.setdefault(Path(path).name, []).append(c.get("id"))
    return found


def test_the_lessons_have_widgets():
    """Lessons 1-3's sliders and calculator compute in the browser (the website has no kernel), each
    cell's stored output being the widget's HTML with its readout; ipywidgets are left where a widget
    needs the kernel (the course model's guesses)."""
    import nbformat

    found = browser_widget_cells()
    assert {"01_dynamic_masking.ipynb", "02_distillation.ipynb", "03_compression.ipynb"} <= set(found)
    for name, ids in found.items():
        cells = {c.get("id"): c for c in nbformat.read(ROOT / "book" / name, as_version=4).cells}
        for cid in ids:
            html = [o["data"]["text/html"] for o in cells[cid].outputs if "text/html" in o.get("data", {})]
            assert len(html) == 1 and 'class="bf-widget' in html[0], f"{name} cell {cid}: no stored widget output"
            assert "nbval-ignore-output" in cells[cid].metadata.get("tags", []), f"{name} cell {cid}"


def test_widgets_build_the_same_under_ipywidgets_7_and_8(colab_widgets):
    cells = widget_cells()
    if not cells:
        pytest.skip("no lesson uses ipywidgets")
    eight, seven = build(cells), build(cells, pythonpath=colab_widgets)
    assert eight["version"].startswith("8.") and seven["version"] == "7.7.1"
    assert len(eight["widgets"]) == len(cells)  # one interact per widget cell
    for a, b in zip(eight["widgets"], seven["widgets"], strict=True):
        assert a["cell"] == b["cell"] and a["controls"] == b["controls"], (a, b)
        assert a["models"] > len(a["controls"]) and b["models"] > len(b["controls"])  # state serialised
