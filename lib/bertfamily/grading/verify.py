"""Verifying outside the kernel: the grader checks each answer itself, in its own process.

While a submission is graded its kernel has no answer key: the ``bertfamily.checks`` it imports only
says that the grader checks (:func:`bertfamily.grading.channel.kernel_checks_source`). Just before
each graded check cell, the grader's exporter (``channel.EXPORTER``, a read-only file of the sandbox, not
part of the notebook) sends the values that the check reads as one display message: numbers, text,
and for a model a summary of what the checks look at (its class, its configuration, which layers are
quantised and to what). nbval receives it, outside the sandbox, as that cell's output, so a later
cell cannot change it. The grader then runs the course's check cell in its own process, on those
values and on small stand-in models rebuilt from the summaries, with :mod:`bertfamily.checks` as the
course ships it: its ✓ / ✗ lines and hints are the task's verdict and feedback.

No pickle crosses from the kernel to the grader: the answers are JSON.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from types import SimpleNamespace

# Imported when this process first scores, before the rows it scores are read: the checks it runs are the
# course's as installed then (and :func:`bertfamily.grading.fingerprints.package_changes` says whether
# anything changed the package while the class was graded).
from bertfamily import checks as _checks
from bertfamily.answers import files_checked_elsewhere
from bertfamily.grading.channel import read_names
from bertfamily.grading.exercise import check_statements

#: What the grader rebuilds of one exported answer in its own process, outside every limit of the run:
#: a tensor of more values is shown to the checks by its shape alone (a ``meta`` tensor, no storage),
#: and a model of more layers is not rebuilt. The kernel's exporter sends what the kernel holds, and a
#: kernel holds cheaply what would cost the grader dearly (``torch.zeros(()).expand(2**17, 2**17)``:
#: 4 bytes there, 64 GiB rebuilt; its own ``modules()`` naming one layer a million times).
MAX_TENSOR_VALUES = 2**20
MAX_LAYERS = 1_000  # the course's largest model, multilingual DistilBERT, has 38 linear layers
#: The configurations rebuilt with transformers: the model types the course's budget counts, without
#: the keys that only make transformers build labels (``num_labels=10**9``: a billion of them).
BUDGET_TYPES = ("bert", "roberta", "xlm-roberta", "distilbert", "albert")
NOT_SIZES = (
    "model_type",
    "transformers_version",
    "_name_or_path",
    "architectures",
    "num_labels",
    "id2label",
    "label2id",
)


def _not_its_configuration(value: dict) -> str | None:
    """Why an exported model cannot be the model its configuration describes (it holds another number of
    values than the budget of that configuration), or None. A stand-in with a copied configuration and
    a few tiny layers is caught here; a real model, pretrained or built from its configuration, is not."""
    if "module" not in value or not isinstance(value.get("config"), dict) or value.get("values") is None:
        return None
    if value["config"].get("model_type") not in BUDGET_TYPES:
        return None  # the budget cannot count it: the checks say what is wrong
    try:
        from transformers import AutoConfig

        from bertfamily import budget

        settings = {
            k: v
            for k, v in value["config"].items()
            if k not in NOT_SIZES and (v is None or isinstance(v, (bool, int, float, str)))
        }
        want = budget.count(AutoConfig.for_model(value["config"]["model_type"], **settings))
    except Exception:  # a configuration the budget cannot read: the checks will say what is wrong
        return None
    hidden = value["config"].get("hidden_size")
    if (
        value["values"] == want - (hidden * hidden + hidden if isinstance(hidden, int) else 0)
        and value["config"]["model_type"] != "distilbert"
    ):  # the course's checks say the same (mistakes.py)
        return (
            "is the encoder without its pooler (add_pooling_layer=False, or the encoder of a masked-LM "
            "model): the exercise counts the bare encoder that AutoModel loads, pooler included"
        )
    if value["values"] != want:
        return (
            f"holds {value['values']:,} values, not the {want:,} of the configuration it carries: "
            "not a real model of that configuration"
        )
    return None


def stand_in(value: dict, objects: dict):
    """The grader's copy of one exported answer: the value itself, or a small model (or tensor) that
    shows the checks what the student's had: class name, configuration, linear and quantised layers."""
    if "plain" in value:
        return value["plain"]
    if "missing" in value:
        raise NameError("not defined when the check ran")
    try:
        return _rebuilt(value, objects)
    except (TypeError, KeyError, AttributeError, RuntimeError, OverflowError) as exc:  # not the exporter's
        raise ValueError(f"not an answer the grader's exporter sends ({type(exc).__name__})") from None


def _rebuilt(value: dict, objects: dict):
    import math

    import torch

    if "tensor" in value:
        dtype, shape = torch.float32 if value["floating"] else torch.int64, value["tensor"]
        if not isinstance(shape, list) or len(shape) > 64 or not all(type(d) is int and d >= 0 for d in shape):
            raise ValueError(f"not the shape of a tensor: {str(shape)[:60]}")
        if math.prod(shape) > MAX_TENSOR_VALUES:  # its shape, without its values (they were never sent)
            return torch.zeros(shape, dtype=dtype, device="meta")
        if value["item"] is not None:
            return torch.full(shape, value["item"], dtype=dtype)
        return torch.zeros(shape, dtype=dtype)
    if "module" in value:
        if value["object"] in objects:  # the same model passed twice (``model is distilbert``)
            return objects[value["object"]]
        from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

        if value["linear"] + len(value["dynamic"]) > MAX_LAYERS:
            raise ValueError(
                f"a model of {value['linear'] + len(value['dynamic']):,} linear layers, more than the "
                f"grader rebuilds ({MAX_LAYERS:,}; the course's models have under 100)"
            )
        model = type(value["module"], (torch.nn.Module,), {})()
        if value["config"] is not None:
            model.config = SimpleNamespace(**value["config"])
        for i in range(value["linear"]):
            model.add_module(f"linear{i}", torch.nn.Linear(1, 1))
        with warnings.catch_warnings():  # torch's deprecation of its quantised tensors: the grader's own stand-in,
            warnings.simplefilter("ignore")  # not the student's, and never mid-way through the progress bar
            for i, dtype in enumerate(value["dynamic"]):
                model.add_module(f"dynamic{i}", DynamicLinear(1, 1, dtype=getattr(torch, dtype)))
        objects[value["object"]] = model
        return model
    if "other" in value:
        return type(value["other"], (), {"__repr__": lambda self, r=value["repr"]: r})()
    raise ValueError(f"the exporter could not read this answer: {value.get('error', value)}")


def recheck(source: str, answers: dict) -> tuple[bool, str]:
    """Run a check cell's source (the course's) in this process on the exported ``answers``.

    Returns (passed, the first line it printed that is not ✓, or why it could not run).
    """
    passed, why, _ = recheck_output(source, answers)
    return passed, why


def recheck_output(source: str, answers: dict) -> tuple[bool, str, str]:
    """:func:`recheck`, and what the check printed (its ✓ / ✗ lines and hints, as the student's
    notebook shows them)."""
    from bertfamily.grading.marks import MARK_LINE

    if "__error__" in answers:
        return False, f"the grader could not read the answers ({answers['__error__']})", ""
    checks = _checks  # the course's, imported before any submission ran; never the kernel's
    objects: dict = {}  # what stand_in rebuilt, shared by the answers (see _rebuilt)
    for name, value in answers.items():
        problem = _not_its_configuration(value) if isinstance(value, dict) else None
        if problem:
            return False, f"`{name}` {problem}", ""
    try:
        namespace = {name: stand_in(value, objects) for name, value in answers.items()}
    except (NameError, ValueError) as exc:
        return False, f"the grader could not rebuild an answer: {exc}", ""
    namespace["checks"] = checks
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), files_checked_elsewhere():  # the run's files: scoring.py
            exec(compile(source, "<check cell>", "exec"), namespace)  # noqa: S102 - the course's code
    except Exception as exc:  # a check never raises on an answer: an answer the kernel could not have had
        return False, f"the check raised {type(exc).__name__}: {exc}"[:200], printed.getvalue()
    text = printed.getvalue()
    marks = [m for m in map(MARK_LINE.match, text.splitlines()) if m]
    failed = [m for m in marks if m.group(1) != "✓"]
    if not marks:
        return False, "the check printed no result", text
    if failed:
        return False, f"✗ {failed[0].group(2)}: {failed[0].group(3)}"[:200], text
    return True, "", text


#: The name of the one check of a check cell that calls no ``checks.check_*`` function.
CELL_CHECK = "its check"


def recheck_each(source: str, answers: dict) -> list[dict]:
    """Each check of a check cell run on its own, in this process, on the exported ``answers``: one
    ``{"check", "passed", "why", "printed", "missing"}`` per statement that calls a check (in order).
    An answer that was not defined when the cell ran (or cannot be rebuilt) fails only the checks that
    read it, and ``missing`` names it; the other checks of the cell are scored on their own."""
    from bertfamily.grading.marks import MARK_LINE

    if "__error__" in answers:
        why = f"the grader could not read the answers ({answers['__error__']})"
        return [
            {"check": c, "passed": False, "why": why, "printed": "", "missing": []}
            for c in [c for c, _ in check_statements(source) if c] or [CELL_CHECK]
        ]
    objects: dict = {}  # what stand_in rebuilt, shared by the answers (see _rebuilt)
    namespace: dict[str, object] = {"checks": _checks}
    absent: dict[str, str | None] = {}  # an answer the checks cannot read -> why (None: not defined)
    for name, value in answers.items():
        problem = _not_its_configuration(value) if isinstance(value, dict) else None
        if problem:
            absent[name] = f"`{name}` {problem}"
            continue
        try:
            namespace[name] = stand_in(value, objects)
        except NameError:
            absent[name] = None  # not defined when the check ran
        except ValueError as exc:
            absent[name] = f"the grader could not rebuild an answer: {exc}"
    results, statements = [], check_statements(source)
    if not any(check for check, _ in statements):  # a cell of its own checks (print ✓ or ✗): one check
        statements = [(CELL_CHECK, source)]
    for check, statement in statements:
        printed = io.StringIO()
        result = {"check": check, "passed": False, "why": "", "printed": "", "missing": []}
        reads = [n for n in read_names(statement) if n in absent]
        try:
            with contextlib.redirect_stdout(printed), files_checked_elsewhere():  # the run's files: scoring.py
                exec(compile(statement, "<check cell>", "exec"), namespace)  # noqa: S102 - the course's code
        except NameError as exc:
            gone = [n for n in reads if n == getattr(exc, "name", None)] or reads
            result["missing"] = [n for n in gone if absent.get(n) is None]
            result["why"] = (
                next((absent[n] for n in gone if absent.get(n)), "")
                or f"`{(gone or [getattr(exc, 'name', '?')])[0]}` was not defined when the check ran"
            )
        except Exception as exc:  # a check never raises on an answer: one the kernel could not have had
            result["why"] = f"the check raised {type(exc).__name__}: {exc}"[:200]
        result["printed"] = text = printed.getvalue()
        marks = [m for m in map(MARK_LINE.match, text.splitlines()) if m]
        if check and not result["why"]:
            failed = [m for m in marks if m.group(1) != "✓"]
            result["passed"] = bool(marks) and not failed
            result["why"] = (
                ""
                if result["passed"]
                else (
                    f"✗ {failed[0].group(2)}: {failed[0].group(3)}"[:200] if failed else "the check printed no result"
                )
            )
        if check:
            results.append(result)
    return results
