"""One HTML output that recomputes itself in the reader's browser: the frame every widget of
:mod:`bertfamily.widgets` is built in.

:func:`page` wraps a widget's controls (``body``), its data (embedded as JSON) and its few lines of
plain JavaScript (``script``, which finds its elements with ``q(selector)`` and its data in
``data``) in one ``<div>`` with the course's style and :data:`PY_FORMAT_JS`, Python's number formats
in JavaScript, so that the page shows the digits Python's ``format`` shows. Nothing is loaded from
anywhere. :func:`element_id` gives each output an element id that a re-execution reproduces;
:class:`BrowserWidget` is what a cell returns (its HTML, and its readout as text).
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json

_COUNTER = itertools.count()

#: Python's number formats in JavaScript: ``fixed(x, d)`` is ``f"{x:.{d}f}"``, ``percent(x, d)`` is
#: ``f"{x:.{d}%}"`` and ``group(n)`` is ``f"{n:,}"``. ``toFixed(100)`` gives the exact decimal
#: expansion of a double (down to 1e-100), which is then rounded half to even, as CPython does.
PY_FORMAT_JS = r"""
function bfFixed(x, d) {
  if (!isFinite(x)) return String(x);
  var neg = x < 0 || Object.is(x, -0), s = Math.abs(x).toFixed(100);
  var dot = s.indexOf('.'), digits = s.slice(0, dot) + s.slice(dot + 1, dot + 1 + d);
  var rest = s.slice(dot + 1 + d), up = false;
  if (rest[0] > '5') up = true;
  else if (rest[0] === '5') up = /[1-9]/.test(rest.slice(1)) || (+digits[digits.length - 1]) % 2 === 1;
  if (up) {
    var a = digits.split(''), i = a.length - 1;
    while (i >= 0 && a[i] === '9') { a[i] = '0'; i--; }
    if (i < 0) a.unshift('1'); else a[i] = String(+a[i] + 1);
    digits = a.join('');
  }
  var whole = digits.slice(0, digits.length - d).replace(/^0+(?=\d)/, ''), frac = digits.slice(digits.length - d);
  return (neg ? '-' : '') + whole + (d ? '.' + frac : '');
}
function bfPercent(x, d) { return bfFixed(x * 100, d) + '%'; }
function bfGroup(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
"""

_STYLE = """
.bf-widget{border:1px solid #d0d7de;border-radius:6px;padding:.6em .9em;margin:.4em 0;font-size:.95em;
 max-width:44em;line-height:1.5}
.bf-widget .bf-controls{display:flex;flex-wrap:wrap;gap:.4em 1.2em;align-items:center;margin-bottom:.5em}
.bf-widget label{font-weight:600;margin-right:.35em}
.bf-widget input[type=range]{vertical-align:middle;width:12em}
.bf-widget output,.bf-widget .bf-readout{font-variant-numeric:tabular-nums}
.bf-widget .bf-bars{display:grid;grid-template-columns:4.5em 1fr 4.5em;gap:.15em .5em;align-items:center}
.bf-widget .bf-bar{height:1em;border-radius:2px;min-width:1px}
.bf-widget .bf-sentence{font-family:var(--pst-font-family-monospace,monospace);
 word-break:break-word}
.bf-widget .bf-a1{background:#fbe3e3;color:#8a1414;font-weight:600}
.bf-widget .bf-a2{background:#fde9d9;color:#8a4a12}
.bf-widget .bf-a3{background:#e2f0e8;color:#1d5e3a}
.bf-widget .bf-note{color:#57606a;font-size:.9em;margin:.3em 0 0}
.bf-widget button{font:inherit;padding:.1em .8em;cursor:pointer}
"""


class BrowserWidget:
    """An HTML output that recomputes itself in the browser; ``text`` is its plain-text readout."""

    def __init__(self, kind: str, html_text: str, text: str):
        self.kind, self.html, self.text = kind, html_text, text

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


def element_id(kind: str, data: dict) -> str:
    """An element id unique within a page and stable across re-executions of the same notebook."""
    digest = hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]
    return f"bf-{kind}-{digest}-{next(_COUNTER)}"


def page(kind: str, uid: str, data: dict, body: str, script: str, noscript: str) -> str:
    """The widget's HTML: ``body`` (its controls and readout), ``data`` as JSON, ``script`` run with
    ``root``, ``data`` and ``q(selector)`` in scope, and ``noscript`` for a page without JavaScript."""
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("</", "<\\/")
    # data-lm-suppress-shortcuts: no JupyterLab shortcut fires from a key pressed in the widget
    return (
        f'<div class="bf-widget bf-{kind}" id="{uid}" data-lm-suppress-shortcuts="true">'
        f"<style>{_STYLE}</style>{body}"
        f'<noscript><p class="bf-note">{html.escape(noscript)}</p></noscript>'
        f'<script type="application/json" class="bf-data">{payload}</script>'
        f"<script>(function(){{{PY_FORMAT_JS}\n"
        f"var root=(document.currentScript&&document.currentScript.closest('.bf-widget'))"
        f"||document.getElementById('{uid}');\n"
        f"if(!root)return;var data=JSON.parse(root.querySelector('script.bf-data').textContent);"
        f"function q(s){{return root.querySelector(s);}}\n"
        # JupyterLab's notebook takes the arrow keys (command mode): keep them for the controls
        f"root.addEventListener('keydown',function(e){{e.stopPropagation();}});\n{script}\n"
        f"root.setAttribute('data-ready','1');}})();</script></div>"
    )


def check_range(name, value, low, high, step):
    """``ValueError`` unless a slider's ``value`` lies in ``[low, high]`` and its ``step`` fits that range."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be a number from {low} to {high}, got {value!r}")
    if not isinstance(step, (int, float)) or step <= 0 or step > high - low:
        raise ValueError(f"the step of {name} must be positive and at most {high - low}, got {step!r}")
