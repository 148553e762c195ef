"""Text a student chose (file names, outputs, answers), made safe for where the grader writes it.

* :func:`escape_controls`: no control character reaches a terminal, a CSV or a Markdown file as itself:
  C0 and C1 controls (ESC, BEL, carriage return...), and the invisible characters that reorder or hide
  text (bidirectional overrides, zero-width ones), are written as ``\\x1b`` or ``\\u202e``.
* :func:`html_text`: what could start HTML or an entity (``<b``, ``&amp;``) as entities, so a viewer of
  Markdown shows HTML as text.
* :func:`disk_name`: a name for a file the grader writes (feedback, the kernel's copy of the
  submission) that any file system takes: short, printable, and unique by a digest of the original.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re

#: Control characters and the invisible ones that reorder or hide text: C0 and C1, every format
#: character (Unicode's category Cf: bidirectional marks, zero-width ones, tags, the soft hyphen...), line
#: and paragraph separators, surrogates, and what shows nothing though it is a letter or a mark (the
#: Hangul fillers, the combining grapheme joiner, variation selectors, Khmer's invisible vowels).
CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff"
    "\uffa0\ufff9-\ufffb\ud800-\udfff\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef\u2800\U00016fe4\U0001d159"
    "\U0001da9b-\U0001da9f\U0001daa1-\U0001daaf]"
)
#: Bytes of a file name the grader writes: at most this many (file systems allow 255).
MAX_NAME_BYTES = 120
_PLAIN = re.compile(r"[^\w.+=,@ -]")


def _escape(match) -> str:
    code = ord(match.group(0))
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape); other surrogates: \\udXXX
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_controls(text, keep: str = "") -> str:
    """``text`` with every control and invisible character escaped, but those in ``keep`` (``"\\n"``
    where the text is a file of lines)."""
    text = os.fspath(text) if not isinstance(text, str) else text
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    return CONTROL.sub(lambda m: m.group(0) if m.group(0) in keep else _escape(m), text)


def display_name(path) -> str:
    """A submission's name as the gradebook, the feedback and the terminal show it: bytes that were not
    UTF-8 as ``\\xff``, control and invisible characters escaped."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    return escape_controls(text)


def markdown_text(text: str) -> str:
    """Text that Markdown shows as it is, inside a line (a title): the characters that start markup there
    backslash-escaped, so a name such as ``[appeal](https:evil.example)``, ``![x](...)`` or ``<img ...>``
    is neither a link, an image nor HTML. Only those: an underscore between letters or digits starts no
    emphasis, and ``jane_doe_1.ipynb`` stays as it reads where the text is pasted as plain text (a
    Canvas comment)."""
    return re.sub(r"([\\`*\[\]()<>&#!|~{}]|(?<![^\W_])_|_(?![^\W_]))", r"\\\1", text)


def html_text(text: str) -> str:
    """Markdown that shows HTML as text: each ``<`` that could open a tag, a comment or an autolink as
    ``&lt;`` (``<script>`` as ``&lt;script>``), each ``&`` that could start an entity as ``&amp;``, and a ``>``
    that starts a line (a quote) as ``&gt;``; any other ``<``, ``>`` or ``&`` stays, so that a file read as
    plain text (a Canvas comment) says "File > Download" and "Restart & Run All" as written."""
    # after an odd number of backslashes, ``&`` and ``<`` are escaped already (``\&``, as :func:`markdown_text` writes)
    free = r"(?<!\\)((?:\\\\)*)"
    text = re.sub(free + r"&(?=#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{0,31};)", r"\1&amp;", text)
    text = re.sub(free + r"<(?=[A-Za-z/!?])", r"\1&lt;", text)
    return re.sub(r"(?m)^([ \t]*)>", r"\1&gt;", text)


def disk_name(name: str, suffix: str = "") -> str:
    """A file name for ``name`` (a submission's base name, any bytes the file system allowed) that every
    file system takes: unchanged when it is short and plain, else its plain characters, cut, and a
    digest of the whole name (so two names never become one)."""
    base = os.fspath(name)
    if isinstance(base, bytes):
        base = base.decode("utf-8", "surrogateescape")
    plain = _PLAIN.sub("_", base).strip(" .") or "submission"
    if plain == base and len((base + suffix).encode("utf-8")) <= MAX_NAME_BYTES:
        return base + suffix
    digest = hashlib.sha256(base.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    room = MAX_NAME_BYTES - len(suffix.encode("utf-8")) - 14  # bytes: é is two, a file system counts bytes
    cut = plain.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
    return f"{cut}-{digest}{suffix}"


def markdown_item(text: str) -> str:
    """One item of the feedback's lists, kept one item: the newlines of a student's error message (or
    of anything else the run said) do not start lines of their own (a heading, a score, a link
    definition), and outside its code spans no ``[`` starts a link or an image (``[appeal](https://...)`` in a
    student's error message is shown as it is written)."""
    text = re.sub(r"[\r\n]+", " ", text)
    runs = [m.span() for m in re.finditer(r"`+", text)]  # a code span: a run of backticks to the next as long
    of_length: dict[int, list[int]] = {}  # each length's runs, in order: the next as long is found by bisection
    for index, (a, b) in enumerate(runs):
        of_length.setdefault(b - a, []).append(index)
    shown: list[str] = []
    done, index = 0, 0
    while index < len(runs):
        start, end = runs[index]
        before = text[done:start]  # outside a code span: a backslash escapes a backtick (it opens no span)
        start += (len(before) - len(before.rstrip("\\"))) % 2
        same = of_length.get(end - start, [])
        after = bisect.bisect_right(same, index)
        if start == end or after == len(same):  # no run as long after it: its backticks are text
            index += 1
            continue
        close = same[after]
        shown += [_no_link(text[done:start]), text[start : runs[close][1]]]
        done, index = runs[close][1], close + 1
    return "".join(shown) + _no_link(text[done:])  # HTML: the feedback's writer escapes it (html_text)


def _no_link(text: str) -> str:
    """Text outside code spans with each ``[`` that a backslash does not already escape escaped (``\\[`` is an
    escaped backslash, then a ``[`` that would open a link)."""
    return re.sub(r"(?<!\\)((?:\\\\)*)\[", r"\1\\[", text)


def relative_names(paths) -> dict:
    """Each of one student's ``paths`` as her feedback names it: relative to the folder they all share
    (``exercise.ipynb``, ``late/exercise.ipynb``), never the instructor's own folders above it."""
    paths = [str(p) for p in paths]
    try:
        common = os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else ""
    except ValueError:  # absolute and relative paths mixed
        common = ""
    return {p: os.path.relpath(p, common) if common else p for p in paths}
