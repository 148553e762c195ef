"""bertfamily.book.glue: myst-nb's glue where it is installed, a harmless stand-in where not (Colab)."""

import subprocess
import sys

import pytest

from bertfamily.book import glue

HIDE_MYST = (
    "import sys, importlib.abc\n"
    "class Hide(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name == 'myst_nb' or name.startswith('myst_nb.'):\n"
    "            raise ModuleNotFoundError(name)\n"
    "sys.meta_path.insert(0, Hide())\n"
)


def test_without_myst_nb_glue_shows_only_what_is_displayed():
    code = HIDE_MYST + (
        "from bertfamily.book import glue\nglue('hidden', 1.25, display=False)\nglue('shown', 'seen', display=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["seen"]


def test_with_myst_nb_glue_records_as_myst_nb_does(monkeypatch):
    glue_module = pytest.importorskip("myst_nb.ext.glue")
    shown = []
    monkeypatch.setattr(glue_module, "ipy_display", lambda data, **kw: shown.append((data, kw["metadata"])))
    glue("x", 0.5, display=False)
    ((data, metadata),) = shown
    assert data == {"application/papermill.record/text/plain": "0.5"}
    assert metadata["scrapbook"]["name"] == "x"


def test_a_bad_name_says_what_is_allowed():
    with pytest.raises(ValueError, match="non-empty name"):
        glue("", 1)


def test_glue_values_records_each_name_hidden(monkeypatch):
    from bertfamily import book

    seen = []
    monkeypatch.setattr(book, "glue", lambda name, value, display=True: seen.append((name, value, display)))
    book.glue_values(a=1, b="two")
    assert seen == [("a", 1, False), ("b", "two", False)]
    with pytest.raises(ValueError, match="at least one"):
        book.glue_values()


def _documented(x):
    """A docstring
    over two lines."""
    return x + 1  # the body


def _bare(x):
    return x


def test_source_drops_the_docstring_only():
    from bertfamily.book import source

    text = source(_documented)
    assert text.splitlines() == ["def _documented(x):", "    return x + 1  # the body"]
    assert '"""A docstring' in source(_documented, docstring=True)
    assert source(_bare) == "def _bare(x):\n    return x"
    with pytest.raises(TypeError, match="function or class"):
        source(len)
