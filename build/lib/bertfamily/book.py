"""What a lesson needs from the book's machinery, working without it too (Colab, a bare download).

``glue`` is myst-nb's where myst-nb is installed (``make setup``, Binder): the website's
``{glue:text}`` roles read what it records, and its outputs are the ones nbval compares. Where it is
not (the Colab cell installs the runtime dependencies only), ``glue`` shows the value when asked to
and records nothing: the numbers in the page's prose are the website's, the reader's run prints its own.
"""
from __future__ import annotations


def glue(name: str, value, display: bool = True) -> None:
    """Record ``value`` under ``name`` for the page's prose (myst-nb), or just show it without myst-nb."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"glue needs a non-empty name (a string), got {name!r}")
    try:
        from myst_nb import glue as myst_glue
    except ModuleNotFoundError:
        if display:
            from IPython.display import display as show
            show(value)
        return
    myst_glue(name, value, display=display)
