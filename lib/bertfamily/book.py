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


def glue_values(**values) -> None:
    """Record several values for the page's prose at once, none displayed:
    ``glue_values(acc_it=0.51, maj_it=0.16)`` is ``glue("acc_it", 0.51, display=False)`` and so on."""
    if not values:
        raise ValueError("glue_values needs at least one name=value")
    for name, value in values.items():
        glue(name, value, display=False)


def source(obj, docstring: bool = False) -> str:
    """The source code of a function or class as the package has it, without its docstring unless
    ``docstring`` (for showing the code a lesson runs, instead of cutting strings by hand)."""
    import ast
    import inspect
    import textwrap

    try:
        text = textwrap.dedent(inspect.getsource(obj))
    except (TypeError, OSError) as err:
        raise TypeError(f"source() needs a function or class defined in Python source, got {obj!r}") from err
    if docstring:
        return text.rstrip()
    node = ast.parse(text).body[0]
    body = getattr(node, "body", [])
    if not (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(getattr(body[0], "value", None), ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return text.rstrip()
    lines = text.splitlines()
    doc = body[0]
    kept = lines[: doc.lineno - 1] + lines[doc.end_lineno :]
    return "\n".join(kept).rstrip()


def show_source(obj, docstring: bool = False) -> None:
    """Print :func:`source` of ``obj``: the code a lesson runs, read from the package itself."""
    print(source(obj, docstring=docstring))
