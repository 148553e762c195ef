"""What crosses the sandbox's wall, both ways, in one place.

Going in: the grader's exporter (:data:`EXPORTER`, a read-only file of the sandbox), the one line put
before each graded check cell that runs it (:func:`with_exports`), and the kernel's ``checks`` module,
which has no answer key (:func:`kernel_checks_source`). Coming out: one display message per graded
check cell (:data:`ANSWERS_MIME`), read back as JSON, never a pickle (:func:`answers_of`). Which names
go out: the names each check cell reads (:func:`read_names`, :func:`exports`).
"""

from __future__ import annotations

import ast
import builtins
import copy
import json

#: The MIME type of the grader's exporter's one message per check cell (never shown by a front end).
ANSWERS_MIME = "application/vnd.bertfamily.answers+json"


#: The grader's exporter, run inside the kernel by one line put before each graded check cell.
#: It never raises (an honest notebook must not fail because of it) and prints nothing.
EXPORTER = r'''
import numbers


def _escape(code):
    if code > 0xFFFF:  # a surrogate pair
        return _escape(0xD800 + ((code - 0x10000) >> 10)) + _escape(0xDC00 + ((code - 0x10000) & 0x3FF))
    return "\\u%04x" % code


def _text(value):
    # JSON of the answers written here, with the methods of Python's own types only (which no kernel can
    # change): not through the kernel's json module, whose functions and encoder a notebook can replace
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    kind = type(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value != value:
            return "NaN"
        return float.__repr__(value) if abs(value) != float("inf") else ("Infinity" if value > 0 else "-Infinity")
    if kind is str:  # ASCII, as json.dumps writes it: a lone surrogate cannot break the message
        return '"' + "".join([c if " " <= c < "\x7f" and c not in '"\\' else _escape(ord(c)) for c in value]) + '"'
    if kind is list:
        return "[" + ", ".join([_text(v) for v in value]) + "]"
    if kind is dict:
        return "{" + ", ".join([_text(str(k)) + ": " + _text(v) for k, v in value.items()]) + "}"
    raise TypeError(f"not an answer's part: {kind.__name__}")


def _summary(value, torch):
    if isinstance(value, torch.nn.Module):
        try:
            from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear
        except ImportError:  # a torch without eager-mode quantisation: no such layers to count
            DynamicLinear = ()
        config = getattr(value, "config", None)
        settings = None
        if config is not None:
            items = config.to_dict() if hasattr(config, "to_dict") else vars(config)
            settings = {k: v for k, v in items.items()
                        if v is None or isinstance(v, (bool, int, float, str))}
        modules = list(value.modules())
        values = sum(p.numel() for p in value.parameters())
        for m in modules:
            if isinstance(m, DynamicLinear):
                weight, bias = m._packed_params._weight_bias()
                values += weight.numel() + (bias.numel() if bias is not None else 0)
        return {"module": type(value).__name__, "object": id(value), "config": settings, "values": values,
                "linear": sum(type(m) is torch.nn.Linear for m in modules),
                "dynamic": [str(m._packed_params.dtype).replace("torch.", "")
                            for m in modules if isinstance(m, DynamicLinear)]}
    if isinstance(value, torch.Tensor):
        one = value.numel() == 1
        return {"tensor": list(value.shape), "item": value.item() if one else None,
                "floating": value.is_floating_point()}
    return None


def _value(value):
    if value is None or isinstance(value, (bool, str)):
        return {"plain": value}
    if isinstance(value, numbers.Integral):
        return {"plain": int(value)}
    if isinstance(value, numbers.Real):
        return {"plain": float(value)}
    try:
        import torch
        found = _summary(value, torch)
        if found is not None:
            return found
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    return {"other": type(value).__name__, "repr": repr(value)[:80]}


def answers(namespace, names):
    try:
        out = {}
        for name in names:
            out[name] = _value(namespace[name]) if name in namespace else {"missing": True}
        return _text(out)
    except Exception as exc:
        return _text({"__error__": str(f"{type(exc).__name__}: {exc}")[:200]})


def export(namespace, names, cell):
    text = answers(namespace, names)
    try:
        from IPython.display import publish_display_data
        publish_display_data({MIME: {"cell": cell, "answers": text}}, metadata={})
    except Exception:
        pass
'''.replace("MIME", repr(ANSWERS_MIME))


def read_names(source: str) -> list[str]:
    """The names a check cell reads (its answers), in order: every name loaded except ``checks``,
    builtins and what the cell assigns itself."""
    tree = ast.parse(source)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id not in names
            and node.id != "checks"
            and node.id not in stored
            and not hasattr(builtins, node.id)
        ):
            names.append(node.id)
    return names


def exports(exercise) -> dict:
    """For each graded check cell of ``exercise``: the names its check reads."""
    return {cid: read_names(source) for task in exercise.graded for cid, source in task.checks}


def with_exports(nb, wanted: dict, exporter):
    """A copy of ``nb`` whose check cells in ``wanted`` first call the exporter (one line). The
    exporter is a read-only file of the sandbox; it sends the answers as one display message."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        names = wanted.get(cell.get("id")) if cell.cell_type == "code" else None
        if names is not None:
            cell.source = (
                f"(lambda f: f.__builtins__['__import__']('runpy').run_path({str(exporter)!r})['export']"
                f"(f.__globals__, {names!r}, {cell.get('id')!r}))(lambda: 0)\n" + cell.source
            )
    return out


MAX_ANSWERS = 100_000  # characters of one answers message (the exercise's are under 2,000)


def sent_answers(outputs) -> list:
    """Every answers message in one cell's re-run outputs, as (cell id it names, answers or None)."""
    found = []
    for out in outputs:
        payload = (out.get("data") or {}).get(ANSWERS_MIME)
        if payload is None:
            continue
        try:
            text = payload["answers"]
            if len(text) > MAX_ANSWERS:
                raise ValueError("too long")
            found.append((payload.get("cell"), json.loads(text)))
        except Exception:  # anything a forger sends (nested too deep, not text): no answers
            found.append((None, None))
    return found


def answers_of(cid: str, outputs, names=None) -> tuple[dict | None, str]:
    """The answers the exporter sent from check cell ``cid`` (None when there are none, or they cannot be
    trusted), and what is wrong with them for the instructor ("" when nothing is). ``names``: what the
    cell's check reads (:func:`read_names`), the only names the exporter sends; a message with others
    is forged (and the grader rebuilds nothing of it)."""
    found = sent_answers(outputs)
    if not found:
        return None, ""
    if len(found) > 1:
        return None, f"{len(found)} answer messages in one check cell (the grader's exporter sends one): forged"
    sent_from, answers = found[0]
    if sent_from != cid or not isinstance(answers, dict):
        return None, "an answer message that the grader's exporter did not send: forged"
    extra = sorted(set(answers) - set(names) - {"__error__"}) if names is not None else []
    if extra:
        shown = ", ".join(str(n)[:40] for n in extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
        return None, f"an answer message with names its check does not read ({shown}): forged"
    return answers, ""


KERNEL_CHECKS = '''"""bertfamily.checks while a submission is graded: the grader checks every answer outside the
kernel, and the answer key (the checks' expected values) stays with the grader."""

{constants}


def _checked_outside(name):
    def check(*args, **kwargs):
        print(f"· {{name}}: checked by the grader, outside the notebook")
    check.__name__ = name
    return check


for _name in {names!r}:
    globals()[_name] = _checked_outside(_name)


def for_the_instructor(text):
    print("· read by your instructor, not scored")


def __getattr__(name):
    raise AttributeError(f"bertfamily.checks.{{name}} is the answer key: it stays with the grader while "
                         "a submission is graded (compute the answer in your own code)")
'''


def kernel_checks_source() -> str:
    """The ``checks`` module the kernel imports while graded: every check function, printing only that
    the grader checks it; every other name raises, saying the answer key is not in the sandbox. Read from
    ``checks.py``'s text (its functions and literal constants): importing it would import torch, seconds of
    every grading command's time."""
    import importlib.util

    spec = importlib.util.find_spec("bertfamily.checks")
    if spec is None or spec.origin is None:
        raise RuntimeError("the course's bertfamily.checks is not installed")
    with open(spec.origin, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    names = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("check_"))
    constants = "\n".join(
        f"{n.targets[0].id} = {n.value.value!r}"
        for n in tree.body
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id.isupper()
        and not n.targets[0].id.startswith("_")
        and isinstance(n.value, ast.Constant)
        and isinstance(n.value.value, (str, int, float))
        and not isinstance(n.value.value, bool)
    )
    return KERNEL_CHECKS.format(constants=constants, names=names)
