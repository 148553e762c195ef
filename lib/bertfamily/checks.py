"""Self-checks for the DistilBERT exercise (``book/exercise_distilbert.ipynb``), one function per task.

Each check prints one line that starts with ``✓`` (right) or ``✗`` (not yet), followed on a wrong
answer by a hint that points at the usual mistake without giving the number away, and returns
``True`` or ``False``. A check never raises on a student's answer: a placeholder left as ``None``,
a model where a number was expected or text where a model was expected all get a hint saying what
the check expected. :mod:`bertfamily.grading` reads the ``✓`` / ``✗`` line of every check cell.

The expected values are never typed here: counts come from :mod:`bertfamily.budget` applied to the
published configurations (:func:`bertfamily.models.published_config`), file sizes from lesson 3's
prediction (:func:`bertfamily.quantization.predicted_bytes`: the weights' bytes at their bit width)
with a tolerance for the few kilobytes of zip and pickle framing that ``torch.save`` adds, which the
measurement in the notebook shows.

The tasks, in the order of the exercise:

1. :func:`check_models`: DistilBERT and BERT-base loaded (bare encoders).
2. :func:`check_parameter_counts`: their parameters counted.
3. :func:`check_reduction`: the fraction of parameters DistilBERT removes (the 39%).
4. :func:`check_predicted_sizes` and :func:`check_combined_factor`: the sizes the budget predicts.
5. :func:`check_quantized`: ``quantize_dynamic`` applied to DistilBERT's linear layers.
6. :func:`check_file_sizes`: both files measured, in bytes.
7. :func:`check_int8_prediction`: what stays fp32, and the int8 file it predicts (with
   :func:`for_the_instructor`, a sentence the instructor reads, never scored).
8. Stretch: :func:`check_speedup` (a timing ratio; machine-dependent, so only plausibility).
9. Stretch: :func:`check_embedding_quantization` (the embedding tables in 8 bits too).
10. :func:`check_multilingual`: multilingual DistilBERT, whose word table dominates, counted,
    quantised and weighed.
"""
from __future__ import annotations

import functools
import numbers

# At import time, not in the checks: the grader imports this module before any submission runs, so
# every module the checks compute with must already be loaded by then (grading/verify.py).
from bertfamily import budget, exercise_rules, quantization
from bertfamily.models import published_config

# In the student's notebook, importing the course's calculators raises the error the grader's sandbox
# raises (bertfamily.exercise_rules): the self-check and the grader allow the same imports.
exercise_rules.install_guard()

DISTILBERT = "distilbert-base-uncased"
BERT = "bert-base-uncased"
MULTILINGUAL = "distilbert-base-multilingual-cased"
PASS, FAIL = "✓", "✗"

#: Relative tolerance between a measured ``torch.save`` file and the weights' bytes it must hold:
#: the framing is tens of kilobytes on files of 60-260 MiB (well under 0.5%), while every mistake
#: the checks recognise is off by several percent or more.
FILE_TOLERANCE = 0.005


# --------------------------------------------------------------------------------------------------
# Expected values, computed from the published configurations


@functools.cache
def _config(name):
    return published_config(name)


def expected_counts() -> tuple[int, int]:
    """(DistilBERT, BERT-base) distinct parameters of the bare encoders, from the budget."""
    return budget.count(_config(DISTILBERT)), budget.count(_config(BERT))


def expected_reduction() -> float:
    """The fraction of BERT-base's parameters that DistilBERT does without."""
    distil, bert = expected_counts()
    return 1 - distil / bert


def distilbert_split() -> dict:
    """DistilBERT's parameters by what dynamic quantisation does to them (:func:`quantization.linear_split`).

    ``linear weights`` become int8; ``embedding tables`` (word and position) stay fp32 unless they are
    quantised too, and then carry a float32 scale and zero point per row; ``rows`` is their row count;
    ``other`` (linear biases, LayerNorms) stays fp32 always.
    """
    config = _config(DISTILBERT)
    split, s = quantization.linear_split(config), budget.sizes(config)
    return {"linear weights": split["linear weights"], "linear layers": 6 * s.layers,  # no pooler
            "embedding tables": split["embeddings"], "rows": s.vocab + s.positions + s.segments,
            "other": split["linear biases"] + split["other"]}


def predicted_file_bytes() -> dict:
    """Bytes of DistilBERT's weights in fp32, with int8 linear layers, and with int8 tables too
    (:func:`quantization.predicted_bytes`)."""
    config = _config(DISTILBERT)
    return {"fp32": quantization.predicted_bytes(config),
            "int8": quantization.predicted_bytes(config, linear_bits=8),
            "int8 + embeddings": quantization.predicted_bytes(config, linear_bits=8, embedding_bits=8)}


# --------------------------------------------------------------------------------------------------
# Reporting


def _report(ok: bool, task: str, message: str, hints=()) -> bool:
    print(f"{PASS if ok else FAIL} {task}: {message}")
    for hint in hints:
        print(f"  hint: {hint}")
    return ok


class _Wrong(Exception):
    """An answer of the wrong kind; its message is the hint (caught inside the checks, never raised)."""


class _Missing(_Wrong):
    """A placeholder still ``None``: no answer yet."""


def _describe(value) -> str:
    try:
        import torch
        if isinstance(value, torch.nn.Module):
            return f"a model ({type(value).__name__})"
        if isinstance(value, torch.Tensor):
            return f"a tensor of shape {tuple(value.shape)}"
    except ImportError:  # pragma: no cover
        pass
    return f"{type(value).__name__} {value!r}"[:80]


def _number(value, name: str, integer: bool = False) -> float:
    """``value`` as a Python number, or :class:`_Wrong` with a hint saying what was expected."""
    kind = "a whole number" if integer else "a number"
    if value is None:
        raise _Missing(f"`{name}` is still None: replace the placeholder with your code, then run "
                     "the cell before this check")
    if isinstance(value, bool):
        raise _Wrong(f"`{name}` should be {kind}, got {value!r}")
    try:
        import torch
        if isinstance(value, torch.nn.Module):
            raise _Wrong(f"`{name}` should be {kind}, got {_describe(value)}: compute the number "
                         "from the model rather than passing the model itself")
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise _Wrong(f"`{name}` should be {kind}, got {_describe(value)}")
            value = value.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, str):
        raise _Wrong(f"`{name}` should be {kind}, not the text {value[:40]!r}: keep the number "
                     "itself, format it only when you print it")
    if not isinstance(value, numbers.Real):
        raise _Wrong(f"`{name}` should be {kind}, got {_describe(value)}")
    value = float(value) if not isinstance(value, numbers.Integral) else int(value)
    if integer and value != int(value):
        raise _Wrong(f"`{name}` should be {kind} (an exact count), got {value!r}")
    if value != value or value in (float("inf"), float("-inf")):
        raise _Wrong(f"`{name}` should be a finite number, got {value!r}")
    return int(value) if integer else value


def _close(value, target, rel) -> bool:
    return abs(value - target) <= rel * abs(target)


def _guarded(task):
    """Decorator: turn a :class:`_Wrong` into a failing report (a hint, never a traceback)."""
    def wrap(check):
        @functools.wraps(check)
        def run(*args, **kwargs):
            try:
                return check(*args, **kwargs)
            except _Missing as missing:
                return _report(False, task, "no answer yet", [str(missing)])
            except _Wrong as wrong:
                return _report(False, task, "not an answer of the expected kind yet", [str(wrong)])
        return run
    return wrap


# --------------------------------------------------------------------------------------------------
# Task 1: load the models

T1 = "Task 1 (load the models)"


def _model_kind(model, name: str) -> str:
    try:
        import torch
    except ImportError:  # pragma: no cover
        raise _Wrong("torch is needed") from None
    if model is None:
        raise _Missing(f"`{name}` is still None: replace the placeholder with your code")
    if not isinstance(model, torch.nn.Module):
        raise _Wrong(f"`{name}` should be a transformers model, got {_describe(model)}")
    config = getattr(model, "config", None)
    return getattr(config, "model_type", None), type(model).__name__


@_guarded(T1)
def check_models(distilbert, bert) -> bool:
    """Are ``distilbert`` and ``bert`` the bare DistilBERT and BERT-base encoders?"""
    kinds = {"distilbert": _model_kind(distilbert, "distilbert"), "bert": _model_kind(bert, "bert")}
    if kinds["distilbert"][0] == "bert" and kinds["bert"][0] == "distilbert":
        return _report(False, T1, "the two models are swapped",
                       ["`distilbert` should hold DistilBERT and `bert` BERT-base"])
    hints = []
    for name, want in (("distilbert", DISTILBERT), ("bert", BERT)):
        kind, cls = kinds[name]
        model = distilbert if name == "distilbert" else bert
        expected = _config(want)
        if kind != expected.model_type:
            hints.append(f"`{name}` is a {cls} (model type {kind!r}); load {want!r}")
            continue
        if cls.endswith(("ForMaskedLM", "ForSequenceClassification", "ForPreTraining")):
            hints.append(f"`{name}` is a {cls}, a model with a task head: the exercise counts the "
                         "bare encoder (AutoModel)")
            continue
        layers_key = "n_layers" if kind == "distilbert" else "num_hidden_layers"
        for key in (layers_key, "vocab_size"):
            if getattr(model.config, key, None) != getattr(expected, key):
                hints.append(f"`{name}` has {key} = {getattr(model.config, key, None)}, not the "
                             f"configuration of {want!r}: load that checkpoint by its name")
                break
    if hints:
        return _report(False, T1, "not the models the exercise asks for", hints)
    return _report(True, T1, "DistilBERT and BERT-base encoders loaded")


# --------------------------------------------------------------------------------------------------
# Task 2: count the parameters

T2 = "Task 2 (parameter counts)"


def _count_hint(value: int, target: int, name: str, config) -> str | None:
    """A hint naming the usual mistake behind a wrong count, or None when none fits."""
    H = getattr(config, "hidden_size", None) or config.dim
    mlm = budget.count(config, mlm_head=True)
    if config.model_type == "bert" and value == target - (H * H + H):
        return (f"`{name}` is short by exactly one H x H layer and its bias: which block at the top "
                "of BERT-base does DistilBERT not have, and did your count include it?")
    if value == mlm:
        return f"`{name}` counts a model with the masked-LM head: count the bare encoder"
    if value == mlm + budget.tied_decoder(config) or value == target + budget.tied_decoder(config):
        return (f"`{name}` counts a tied matrix twice: summing state_dict() lists the decoder "
                "and the word embeddings separately although they are one tensor; sum over "
                "model.parameters()")
    if 0 < value < 1000:
        return (f"`{name}` = {value} looks like the number of weight tensors, not of the numbers "
                "in them: add up each tensor's numel()")
    if _close(value * 1e6, target, 0.01) or _close(value * 1e9, target, 0.01):
        return f"`{name}` looks rounded to millions or billions: give the exact count"
    return None


@_guarded(T2)
def check_parameter_counts(distilbert_count, bert_count) -> bool:
    """Exact parameter counts of DistilBERT and BERT-base (bare encoders, tied tensors once)."""
    distil = _number(distilbert_count, "distilbert_count", integer=True)
    bert = _number(bert_count, "bert_count", integer=True)
    want_distil, want_bert = expected_counts()
    if distil == want_distil and bert == want_bert:
        return _report(True, T2, f"DistilBERT {distil:,} and BERT-base {bert:,} parameters")
    if distil == want_bert and bert == want_distil:
        return _report(False, T2, "the two counts are swapped",
                       ["which of the two models is the smaller one?"])
    hints = []
    for value, target, name, model in ((distil, want_distil, "distilbert_count", DISTILBERT),
                                       (bert, want_bert, "bert_count", BERT)):
        if value != target:
            hints.append(_count_hint(value, target, name, _config(model))
                         or f"`{name}` is not the count of the {model} encoder: sum "
                            "p.numel() over model.parameters()")
    return _report(False, T2, "not the exact counts yet", hints)


# --------------------------------------------------------------------------------------------------
# Task 3: the reduction

T3 = "Task 3 (the reduction)"


@_guarded(T3)
def check_reduction(reduction) -> bool:
    """The fraction (between 0 and 1) of BERT-base's parameters DistilBERT removes."""
    value = _number(reduction, "reduction")
    target = expected_reduction()
    kept = 1 - target
    tol = 5e-4
    if abs(value - target) <= tol:
        return _report(True, T3, f"DistilBERT has {value:.1%} fewer parameters than BERT-base")
    if abs(value - 100 * target) <= 100 * tol:
        hint = "that is a percentage: give the fraction (between 0 and 1); format it as % when printing"
    elif abs(value - kept) <= tol or abs(value - 100 * kept) <= 100 * tol:
        hint = "that is the fraction DistilBERT keeps; the question is how much it removes"
    elif abs(value - 1 / kept) <= 1e-3 or abs(value - (1 / kept - 1)) <= 1e-3:
        hint = "the ratio is upside down: divide by BERT-base's count, the model you start from"
    elif abs(value - target) <= 0.01:
        hint = "close, but rounded too early: compute with the exact counts and round only when printing"
    elif value < 0:
        hint = "a negative reduction: the ratio is upside down"
    elif 1 < value <= 100:
        hint = ("a reduction above 1 looks like a percentage: give the fraction (between 0 and 1), "
                "and check the counts of task 2")
    else:
        hint = "compare the two counts of task 2: what share of BERT-base's parameters is gone?"
    return _report(False, T3, "not the reduction yet", [hint])


# --------------------------------------------------------------------------------------------------
# Task 4: predictions from the budget

T4 = "Task 4 (predicted sizes)"
T4b = "Task 4 (combined factor)"


@_guarded(T4)
def check_predicted_sizes(fp32_mib, int8_mib) -> bool:
    """DistilBERT's size in MiB at 32 and at 8 bits per parameter, predicted from the count."""
    fp32 = _number(fp32_mib, "fp32_mib")
    int8 = _number(int8_mib, "int8_mib")
    n = expected_counts()[0]
    want = {"fp32_mib": budget.to_mib(n, 32), "int8_mib": budget.to_mib(n, 8)}
    got = {"fp32_mib": fp32, "int8_mib": int8}
    tol = 0.0005
    if all(_close(got[k], want[k], tol) for k in want):
        return _report(True, T4, f"{fp32:.1f} MiB in fp32, {int8:.1f} MiB at 8 bits")
    if _close(fp32, want["int8_mib"], tol) and _close(int8, want["fp32_mib"], tol):
        return _report(False, T4, "the two sizes are swapped", ["which takes more bytes per weight?"])
    hints = []
    for key, bits in (("fp32_mib", 32), ("int8_mib", 8)):
        value, target = got[key], want[key]
        if _close(value, target, tol):
            continue
        if _close(value, target * budget.MIB / 1e6, tol):
            hints.append(f"`{key}` is in MB (10**6 bytes); a MiB is 2**20 bytes")
        elif _close(value, target * 8, tol):
            hints.append(f"`{key}` counts bits, not bytes: a byte is 8 bits")
        elif _close(value, target * 1024, tol):
            hints.append(f"`{key}` looks like KiB: divide by 2**20 bytes, not 2**10")
        elif _close(value, target / 1024, tol):
            hints.append(f"`{key}` looks like GiB: the task asks for MiB (2**20 bytes)")
        elif any(_close(value, budget.to_mib(n, b), tol) for b in (1, 2, 4, 16, 64) if b != bits):
            hints.append(f"`{key}` uses the wrong number of bytes per parameter: how many bytes "
                         f"does {'an' if bits == 8 else 'a'} {bits}-bit number take?")
        elif _close(value, budget.to_mib(expected_counts()[1], bits), tol):
            hints.append(f"`{key}` is BERT-base's size: the task asks about DistilBERT")
        else:
            hints.append(f"`{key}`: multiply the parameter count by the bytes per parameter at "
                         f"{bits} bits, then divide by the bytes in a MiB")
    return _report(False, T4, "not the predicted sizes yet", hints)


@_guarded(T4b)
def check_combined_factor(factor) -> bool:
    """How many times smaller int8 DistilBERT is than fp32 BERT-base (bytes of weights)."""
    value = _number(factor, "factor")
    distil, bert = expected_counts()
    target = budget.to_bytes(bert, 32) / budget.to_bytes(distil, 8)
    tol = 0.001
    if _close(value, target, tol):
        return _report(True, T4b, f"int8 DistilBERT is {value:.2f}x smaller than fp32 BERT-base")
    if _close(value, 1 / target, tol):
        hint = "the ratio is upside down: the factor says how many times smaller, so it is above 1"
    elif _close(value, bert / distil, tol):
        hint = "that is distillation alone: include the bits (32 down to 8) as well"
    elif _close(value, 4.0, tol):
        hint = "that is quantisation alone: include the parameters distillation removed as well"
    elif _close(value, target / 2, tol) or _close(value, target * 2, tol):
        hint = "check the bytes per parameter at 32 and at 8 bits"
    else:
        hint = "divide the bytes of fp32 BERT-base by the bytes of int8 DistilBERT"
    return _report(False, T4b, "not the combined factor yet", [hint])


# --------------------------------------------------------------------------------------------------
# Task 5: quantize_dynamic

T5 = "Task 5 (quantize_dynamic)"


@_guarded(T5)
def check_quantized(distilbert_int8, distilbert) -> bool:
    """``distilbert_int8`` is DistilBERT with every ``nn.Linear`` dynamically quantised to qint8,
    and ``distilbert`` (the fp32 model) was left as it was."""
    import torch
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    model = distilbert_int8
    if model is None:
        return _report(False, T5, "no answer yet", [
            "`distilbert_int8` is still None: quantize_dynamic returns the quantised model, "
            "assign its result to `distilbert_int8`"])
    _model_kind(model, "distilbert_int8")
    original_ok = isinstance(distilbert, torch.nn.Module)
    want = distilbert_split()["linear layers"]
    dynamic = [m for m in model.modules() if isinstance(m, DynamicLinear)]
    floats = [m for m in model.modules() if type(m) is torch.nn.Linear]
    if original_ok and model is distilbert:
        if dynamic:
            return _report(False, T5, "the fp32 model was quantised in place", [
                "with inplace=True `distilbert` itself lost its fp32 layers, and the fp32 file "
                "you measure next would be the int8 one: quantise a copy (the default, "
                "inplace=False), reload `distilbert` and run the cells again"])
        return _report(False, T5, "`distilbert_int8` is the fp32 model itself", [
            "quantize_dynamic returns a new model: assign its result to `distilbert_int8`"])
    if original_ok and any(isinstance(m, DynamicLinear) for m in distilbert.modules()):
        return _report(False, T5, "`distilbert` was quantised too", [
            "the fp32 model must stay fp32 for the size comparison: quantise a copy (the default, "
            "inplace=False), reload `distilbert` and run the cells again"])
    if getattr(getattr(model, "config", None), "model_type", None) != "distilbert":
        return _report(False, T5, "not DistilBERT", ["quantise the DistilBERT model of task 1"])
    if not dynamic:
        return _report(False, T5, "no layer of `distilbert_int8` is quantised", [
            "pass the set of module types to convert, {torch.nn.Linear}, to quantize_dynamic"])
    dtypes = {m._packed_params.dtype for m in dynamic}
    if dtypes != {torch.qint8}:
        names = ", ".join(sorted(str(d).replace("torch.", "") for d in dtypes))
        return _report(False, T5, f"the linear layers hold {names} weights", [
            "ask quantize_dynamic for 8-bit integers: dtype=torch.qint8"])
    if floats or len(dynamic) != want:
        return _report(False, T5, f"{len(dynamic)} of DistilBERT's linear layers quantised", [
            "every nn.Linear should be converted: pass {torch.nn.Linear} to quantize_dynamic"])
    return _report(True, T5, f"all {len(dynamic)} linear layers hold int8 weights")


# --------------------------------------------------------------------------------------------------
# Task 6: file sizes


T6 = "Task 6 (file sizes)"


def _size_hint(value, target, name) -> str:
    if _close(value * budget.MIB, target, FILE_TOLERANCE):
        return f"`{name}` is in MiB: the task asks for the file size in bytes (os.path.getsize)"
    if _close(value * 1e6, target, FILE_TOLERANCE):
        return f"`{name}` is in MB: the task asks for the file size in bytes (os.path.getsize)"
    if _close(value, 8 * target, FILE_TOLERANCE):
        return f"`{name}` counts bits: give bytes"
    return None


@_guarded(T6)
def check_file_sizes(fp32_bytes, int8_bytes) -> bool:
    """Bytes of ``torch.save(model.state_dict(), path)`` for fp32 DistilBERT and its int8 version."""
    fp32 = _number(fp32_bytes, "fp32_bytes")
    int8 = _number(int8_bytes, "int8_bytes")
    want = predicted_file_bytes()

    def holds(value, target):  # a file holds its weights and a little framing: never exactly the weights
        return target < value <= target * (1 + FILE_TOLERANCE)

    if holds(fp32, want["fp32"]) and holds(int8, want["int8"]):
        return _report(True, T6, f"fp32 {fp32 / budget.MIB:.1f} MiB, int8 {int8 / budget.MIB:.1f} MiB "
                                 f"({fp32 / int8:.2f}x smaller)")
    if holds(int8, want["fp32"]) and holds(fp32, want["int8"]):
        return _report(False, T6, "the two sizes are swapped", ["which file holds 8-bit weights?"])
    hints = []
    for value, target, name in ((fp32, want["fp32"], "fp32_bytes"), (int8, want["int8"], "int8_bytes")):
        if holds(value, target):
            continue
        hint = _size_hint(value, target, name)
        if hint is None and name == "int8_bytes" and holds(value, want["fp32"]):
            hint = ("the int8 file is as big as the fp32 one: did you save the quantised model "
                    "(`distilbert_int8`), not the original?")
        if hint is None and name == "fp32_bytes" and holds(value, want["int8"]):
            hint = ("the fp32 file is as small as the int8 one: was `distilbert` quantised in place? "
                    "Reload it and save its state_dict")
        if hint is None and name == "int8_bytes" and holds(value, want["int8 + embeddings"]):
            hint = ("that file has int8 embeddings too (the stretch task): here quantise only the "
                    "linear layers")
        if hint is None and value == target:
            hint = (f"`{name}` is the size predicted from the counts, to the byte: a file also holds "
                    "torch.save's framing, so measure it (os.path.getsize)")
        if hint is None and 0 < value < target:
            hint = (f"`{name}` is smaller than the weights the file must hold: save the whole "
                    "state_dict() with torch.save, then measure the file")
        hints.append(hint or f"`{name}`: save model.state_dict() with torch.save to a file and "
                             "take os.path.getsize of that file")
    return _report(False, T6, "not the measured sizes yet", hints)


# --------------------------------------------------------------------------------------------------
# Task 7: what stays fp32, and the int8 file it predicts

T7 = "Task 7 (what stays fp32)"


def kept_in_fp32() -> int:
    """DistilBERT's parameters that ``quantize_dynamic`` leaves in fp32: the embedding tables, the linear
    layers' biases and the LayerNorms (everything but the linear weights)."""
    split = distilbert_split()
    return split["embedding tables"] + split["other"]


@_guarded(T7)
def check_int8_prediction(kept_fp32, int8_predicted_bytes, int8_bytes) -> bool:
    """``kept_fp32``: the parameters that stay 32-bit; ``int8_predicted_bytes``: the int8 file predicted
    from the counts (linear weights at one byte, the kept parameters at four), which the measured
    ``int8_bytes`` of task 6 must hold with no more than the file's framing on top."""
    kept = _number(kept_fp32, "kept_fp32", integer=True)
    predicted = _number(int8_predicted_bytes, "int8_predicted_bytes")
    measured = _number(int8_bytes, "int8_bytes")
    split, want = distilbert_split(), predicted_file_bytes()["int8"]
    if kept != kept_in_fp32():
        if kept == split["embedding tables"]:
            hint = "the embedding tables stay fp32, and so do two smaller kinds of parameter: which?"
        elif kept == split["other"]:
            hint = "the biases and LayerNorms stay fp32: and which large tables are not nn.Linear at all?"
        elif kept == split["linear weights"]:
            hint = "that is what quantize_dynamic converted to int8: count what it left alone"
        else:
            hint = ("count the parameters that are not the weight matrix of an nn.Linear "
                    "(sum p.numel() over the model's parameters, less the linear weights)")
        return _report(False, T7, "not the number of parameters that stay fp32", [hint])
    if predicted == measured:
        return _report(False, T7, "`int8_predicted_bytes` is the measured size itself", [
            "predict the file from the counts: the linear weights at 1 byte, the kept parameters at 4"])
    if not _close(predicted, want, 1e-6):
        total = kept + split["linear weights"]
        if _close(predicted, total, 1e-6):
            hint = "that is task 4's 8-bit size: the parameters that stay fp32 take 4 bytes each"
        elif _close(predicted * budget.MIB, want, 1e-3):
            hint = "`int8_predicted_bytes` is in MiB: give bytes"
        else:
            hint = "the linear weights at 1 byte each plus the parameters that stay fp32 at 4 bytes each"
        return _report(False, T7, "not the size those counts predict", [hint])
    if not want < measured <= want * (1 + FILE_TOLERANCE):
        return _report(False, T7, "the prediction is right, but `int8_bytes` is not the int8 file of task 6", [
            "measure the file of `distilbert_int8` in task 6 and run its cells again"])
    share, extra = kept * 4 / want, (measured - want) / 1024
    return _report(True, T7, f"{kept:,} parameters stay fp32, {share:.0%} of the int8 file's bytes; "
                             f"predicted {want / budget.MIB:.1f} MiB, the file is {extra:.0f} KiB more")


def for_the_instructor(text) -> None:
    """Show a free answer that the instructor reads; it is never scored (prints no ✓ or ✗)."""
    if isinstance(text, str) and text.strip():
        print(f"· for your instructor, not scored: {' '.join(text.split())}")
    else:
        print("· nothing written yet for your instructor (a sentence, as a string)")


# --------------------------------------------------------------------------------------------------
# Tasks 8 and 9 (stretch)

T8 = "Task 9, stretch (int8 embeddings)"
T8b = "Task 8, stretch (speed)"


@_guarded(T8)
def check_embedding_quantization(int8_all_bytes) -> bool:
    """Bytes of the file of DistilBERT with int8 linear layers *and* 8-bit embedding tables."""
    value = _number(int8_all_bytes, "int8_all_bytes")
    want = predicted_file_bytes()
    target = want["int8 + embeddings"]
    if target < value <= target * (1 + FILE_TOLERANCE):
        return _report(True, T8, f"{value / budget.MIB:.1f} MiB with 8-bit embeddings "
                                 f"({want['fp32'] / value:.2f}x under fp32)")
    hint = _size_hint(value, target, "int8_all_bytes")
    if hint is None and want["int8"] <= value <= want["int8"] * (1 + FILE_TOLERANCE):
        hint = ("that is the file with int8 linear layers only: give quantize_dynamic a qconfig for "
                "nn.Embedding too (float_qparams_weight_only_qconfig)")
    if hint is None and value == target:
        hint = "that is the size predicted from the counts, to the byte: save the model and measure its file"
    if hint is None and value < target:
        hint = "smaller than the 8-bit tables must be: save the whole state_dict() and measure the file"
    return _report(False, T8, "not the size with int8 embeddings yet",
                   [hint or "map nn.Linear and nn.Embedding to their qconfigs, save the state_dict, "
                            "then take os.path.getsize"])


@_guarded(T8b)
def check_speedup(ratio) -> bool:
    """A measured speed ratio, slower model's time over faster model's time (machine-dependent).

    Timings vary, so the check asks only for a plausible ratio above 1: below 1 means the ratio was
    taken the wrong way round, and a value above 20 means something other than time was divided.
    """
    value = _number(ratio, "ratio")
    if value <= 0:
        return _report(False, T8b, "not a speed ratio", ["divide one positive time by another"])
    if value < 1:
        return _report(False, T8b, "the ratio is upside down",
                       ["divide the slower model's time by the faster one's, so the ratio is above 1"])
    if value > 20:
        return _report(False, T8b, "implausibly large", [
            "time each model on the same inputs, after a warm-up call, and divide the times"])
    return _report(True, T8b, f"{value:.1f}x faster on this machine (timings vary; not compared)")


# --------------------------------------------------------------------------------------------------
# Task 10: a model whose word table dominates

T10 = "Task 10 (multilingual DistilBERT)"


def multilingual_expected() -> dict:
    """Multilingual DistilBERT's parameter count, and the bytes of its weights in fp32 and with int8
    linear layers (:func:`quantization.predicted_bytes`)."""
    config = _config(MULTILINGUAL)
    return {"count": budget.count(config), "fp32": quantization.predicted_bytes(config),
            "int8": quantization.predicted_bytes(config, linear_bits=8)}


@_guarded(T10)
def check_multilingual(multilingual_count, multilingual_int8_bytes, multilingual_saving) -> bool:
    """``multilingual_count``: multilingual DistilBERT's parameters; ``multilingual_int8_bytes``: the file of
    its state_dict with int8 linear layers; ``multilingual_saving``: the share of the fp32 size (4 bytes a
    parameter) that the int8 file saves, computed from the student's own measurement."""
    count = _number(multilingual_count, "multilingual_count", integer=True)
    size = _number(multilingual_int8_bytes, "multilingual_int8_bytes")
    saving = _number(multilingual_saving, "multilingual_saving")
    want = multilingual_expected()
    if count != want["count"]:
        distil = expected_counts()[0]
        hint = ("that is DistilBERT's count: load distilbert-base-multilingual-cased" if count == distil
                else "sum p.numel() over multilingual.parameters(), before you quantise it")
        return _report(False, T10, "not multilingual DistilBERT's parameter count", [hint])
    if not want["int8"] < size <= want["int8"] * (1 + FILE_TOLERANCE):
        hint = _size_hint(size, want["int8"], "multilingual_int8_bytes")
        if hint is None and want["fp32"] < size <= want["fp32"] * (1 + FILE_TOLERANCE):
            hint = ("that file is as big as the fp32 model: quantize_dynamic(..., inplace=True) changes the "
                    "model itself; without inplace, save the model it returns")
        if hint is None and size == want["int8"]:
            hint = "that is the size predicted from the counts, to the byte: save the model and measure its file"
        return _report(False, T10, "not the int8 file's size yet", [
            hint or "quantise the nn.Linear layers to qint8, torch.save the state_dict, then os.path.getsize"])
    right = 1 - size / (4 * count)
    if abs(saving - right) > FILE_TOLERANCE:
        if abs(saving - 100 * right) <= 100 * FILE_TOLERANCE:
            hint = "`multilingual_saving` is in percent: give a fraction between 0 and 1"
        elif abs(saving - (1 - right)) <= FILE_TOLERANCE:
            hint = "that is the share the int8 file keeps: the saving is what it no longer needs"
        elif saving > 1:
            hint = "that looks like a ratio of sizes: the saving is 1 - int8 size / fp32 size"
        else:
            hint = "1 - (the int8 file's bytes) / (4 bytes times the parameter count)"
        return _report(False, T10, "not the share int8 saves", [hint])
    distil = predicted_file_bytes()
    return _report(True, T10, f"int8 linear layers save {saving:.0%} of multilingual DistilBERT, against "
                              f"{1 - distil['int8'] / distil['fp32']:.0%} of DistilBERT: its word table "
                              f"stays 32-bit")
