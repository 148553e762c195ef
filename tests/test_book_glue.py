"""bertfamily.book.glue: myst-nb's glue where it is installed, a harmless stand-in where not (Colab)."""
import subprocess
import sys

import pytest

from bertfamily.book import glue

HIDE_MYST = ("import sys, importlib.abc\n"
             "class Hide(importlib.abc.MetaPathFinder):\n"
             "    def find_spec(self, name, path, target=None):\n"
             "        if name == 'myst_nb' or name.startswith('myst_nb.'):\n"
             "            raise ModuleNotFoundError(name)\n"
             "sys.meta_path.insert(0, Hide())\n")


def test_without_myst_nb_glue_shows_only_what_is_displayed():
    code = HIDE_MYST + ("from bertfamily.book import glue\n"
                        "glue('hidden', 1.25, display=False)\nglue('shown', 'seen', display=True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["seen"]


def test_with_myst_nb_glue_records_as_myst_nb_does(monkeypatch):
    glue_module = pytest.importorskip("myst_nb.ext.glue")
    shown = []
    monkeypatch.setattr(glue_module, "ipy_display", lambda data, **kw: shown.append((data, kw["metadata"])))
    glue("x", 0.5, display=False)
    (data, metadata), = shown
    assert data == {"application/papermill.record/text/plain": "0.5"}
    assert metadata["scrapbook"]["name"] == "x"


def test_a_bad_name_says_what_is_allowed():
    with pytest.raises(ValueError, match="non-empty name"):
        glue("", 1)
