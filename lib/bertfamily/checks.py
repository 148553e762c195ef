"""Self-checks for the DistilBERT exercise (``book/exercise_distilbert.ipynb``), one function per task.

Each check prints one line that starts with ``✓`` (right) or ``✗`` (not yet), followed on a wrong
answer by a hint that points at the usual mistake without giving the number away
(:mod:`bertfamily.mistakes` finds it), and returns ``True`` or ``False``. A check never raises on a
student's answer: a placeholder left as ``None``, a model where a number was expected or text where a
model was expected all get a hint saying what the check expected (:mod:`bertfamily.answers` reads
the answers and prints the verdicts). :mod:`bertfamily.grading` reads the ``✓`` / ``✗`` line of
every check cell.

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

# At import time, not in the checks: the grader imports this module before any submission runs, so
# every module the checks compute with must already be loaded by then (grading/verify.py).
from bertfamily import budget, exercise_rules, mistakes, quantization
from bertfamily.answers import as_number, close, guarded, model_kind, verdict
from bertfamily.models import published_config

# In the student's notebook, importing the course's calculators raises the error the grader's sandbox
# raises (bertfamily.exercise_rules): the self-check and the grader allow the same imports.
exercise_rules.install_guard()

DISTILBERT = "distilbert-base-uncased"
BERT = "bert-base-uncased"
MULTILINGUAL = "distilbert-base-multilingual-cased"

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
# Task 1: load the models

T1 = "Task 1 (load the models)"


@guarded(T1)
def check_models(distilbert, bert) -> bool:
    """Are ``distilbert`` and ``bert`` the bare DistilBERT and BERT-base encoders?"""
    kinds = {"distilbert": model_kind(distilbert, "distilbert"), "bert": model_kind(bert, "bert")}
    if kinds["distilbert"][0] == "bert" and kinds["bert"][0] == "distilbert":
        return verdict(False, T1, "the two models are swapped",
                       ["`distilbert` should hold DistilBERT and `bert` BERT-base"])
    hints = [hint for name, model, want in (("distilbert", distilbert, DISTILBERT), ("bert", bert, BERT))
             if (hint := mistakes.model_mistake(model, name, want, _config(want))) is not None]
    if hints:
        return verdict(False, T1, "not the models the exercise asks for", hints)
    return verdict(True, T1, "DistilBERT and BERT-base encoders loaded")


# --------------------------------------------------------------------------------------------------
# Task 2: count the parameters

T2 = "Task 2 (parameter counts)"


@guarded(T2)
def check_parameter_counts(distilbert_count, bert_count) -> bool:
    """Exact parameter counts of DistilBERT and BERT-base (bare encoders, tied tensors once)."""
    distil = as_number(distilbert_count, "distilbert_count", integer=True)
    bert = as_number(bert_count, "bert_count", integer=True)
    want_distil, want_bert = expected_counts()
    if distil == want_distil and bert == want_bert:
        return verdict(True, T2, f"DistilBERT {distil:,} and BERT-base {bert:,} parameters")
    if distil == want_bert and bert == want_distil:
        return verdict(False, T2, "the two counts are swapped",
                       ["which of the two models is the smaller one?"])
    hints = [mistakes.count_mistake(value, target, name, model, _config(model))
             for value, target, name, model in ((distil, want_distil, "distilbert_count", DISTILBERT),
                                                (bert, want_bert, "bert_count", BERT)) if value != target]
    return verdict(False, T2, "not the exact counts yet", hints)


# --------------------------------------------------------------------------------------------------
# Task 3: the reduction

T3 = "Task 3 (the reduction)"


@guarded(T3)
def check_reduction(reduction) -> bool:
    """The fraction (between 0 and 1) of BERT-base's parameters DistilBERT removes."""
    value = as_number(reduction, "reduction")
    target = expected_reduction()
    tol = 5e-4
    if abs(value - target) <= tol:
        return verdict(True, T3, f"DistilBERT has {value:.1%} fewer parameters than BERT-base")
    (distil, bert), hidden = expected_counts(), _config(BERT).hidden_size
    no_pooler = 1 - distil / (bert - hidden * hidden - hidden)  # a BERT-base counted without its pooler
    return verdict(False, T3, "not the reduction yet", [mistakes.reduction_mistake(value, target, tol, no_pooler)])


# --------------------------------------------------------------------------------------------------
# Task 4: predictions from the budget

T4 = "Task 4 (predicted sizes)"
T4b = "Task 4 (combined factor)"


@guarded(T4)
def check_predicted_sizes(fp32_mib, int8_mib) -> bool:
    """DistilBERT's size in MiB at 32 and at 8 bits per parameter, predicted from the count."""
    fp32 = as_number(fp32_mib, "fp32_mib")
    int8 = as_number(int8_mib, "int8_mib")
    n = expected_counts()[0]
    want = {"fp32_mib": budget.to_mib(n, 32), "int8_mib": budget.to_mib(n, 8)}
    got = {"fp32_mib": fp32, "int8_mib": int8}
    tol = 0.0005
    if all(close(got[k], want[k], tol) for k in want):
        return verdict(True, T4, f"{fp32:.1f} MiB in fp32, {int8:.1f} MiB at 8 bits")
    if close(fp32, want["int8_mib"], tol) and close(int8, want["fp32_mib"], tol):
        return verdict(False, T4, "the two sizes are swapped", ["which takes more bytes per weight?"])
    hints = [mistakes.predicted_size_mistake(key, got[key], bits, n, expected_counts()[1], tol)
             for key, bits in (("fp32_mib", 32), ("int8_mib", 8)) if not close(got[key], want[key], tol)]
    return verdict(False, T4, "not the predicted sizes yet", hints)


@guarded(T4b)
def check_combined_factor(factor) -> bool:
    """How many times smaller int8 DistilBERT is than fp32 BERT-base (bytes of weights)."""
    value = as_number(factor, "factor")
    distil, bert = expected_counts()
    target = budget.to_bytes(bert, 32) / budget.to_bytes(distil, 8)
    tol = 0.001
    if close(value, target, tol):
        return verdict(True, T4b, f"int8 DistilBERT is {value:.2f}x smaller than fp32 BERT-base")
    return verdict(False, T4b, "not the combined factor yet",
                   [mistakes.factor_mistake(value, target, distil, bert, tol)])


# --------------------------------------------------------------------------------------------------
# Task 5: quantize_dynamic

T5 = "Task 5 (quantize_dynamic)"


@guarded(T5)
def check_quantized(distilbert_int8, distilbert) -> bool:
    """``distilbert_int8`` is DistilBERT with every ``nn.Linear`` dynamically quantised to qint8,
    and ``distilbert`` (the fp32 model) was left as it was."""
    import torch
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    model = distilbert_int8
    if model is None:
        return verdict(False, T5, "no answer yet", [
            "`distilbert_int8` is still None: quantize_dynamic returns the quantised model, "
            "assign its result to `distilbert_int8`"])
    model_kind(model, "distilbert_int8")
    original_ok = isinstance(distilbert, torch.nn.Module)
    want = distilbert_split()["linear layers"]
    dynamic = [m for m in model.modules() if isinstance(m, DynamicLinear)]
    floats = [m for m in model.modules() if type(m) is torch.nn.Linear]
    if original_ok and model is distilbert:
        if dynamic:
            return verdict(False, T5, "the fp32 model was quantised in place", [
                "with inplace=True `distilbert` itself lost its fp32 layers, and the fp32 file "
                "you measure next would be the int8 one: quantise a copy (the default, "
                "inplace=False), reload `distilbert` and run the cells again"])
        return verdict(False, T5, "`distilbert_int8` is the fp32 model itself", [
            "quantize_dynamic returns a new model: assign its result to `distilbert_int8`"])
    if original_ok and any(isinstance(m, DynamicLinear) for m in distilbert.modules()):
        return verdict(False, T5, "`distilbert` was quantised too", [
            "the fp32 model must stay fp32 for the size comparison: quantise a copy (the default, "
            "inplace=False), reload `distilbert` and run the cells again"])
    if getattr(getattr(model, "config", None), "model_type", None) != "distilbert":
        return verdict(False, T5, "not DistilBERT", ["quantise the DistilBERT model of task 1"])
    if not dynamic:
        return verdict(False, T5, "no layer of `distilbert_int8` is quantised", [
            "pass the set of module types to convert, {torch.nn.Linear}, to quantize_dynamic"])
    dtypes = {m._packed_params.dtype for m in dynamic}
    if dtypes != {torch.qint8}:
        names = ", ".join(sorted(str(d).replace("torch.", "") for d in dtypes))
        return verdict(False, T5, f"the linear layers hold {names} weights", [
            "ask quantize_dynamic for 8-bit integers: dtype=torch.qint8"])
    if floats or len(dynamic) != want:
        return verdict(False, T5, f"{len(dynamic)} of DistilBERT's linear layers quantised", [
            "every nn.Linear should be converted: pass {torch.nn.Linear} to quantize_dynamic"])
    return verdict(True, T5, f"all {len(dynamic)} linear layers hold int8 weights")


# --------------------------------------------------------------------------------------------------
# Task 6: file sizes


T6 = "Task 6 (file sizes)"


@guarded(T6, files=("fp32_bytes", "int8_bytes"))
def check_file_sizes(fp32_bytes, int8_bytes) -> bool:
    """Bytes of ``torch.save(model.state_dict(), path)`` for fp32 DistilBERT and its int8 version."""
    fp32 = as_number(fp32_bytes, "fp32_bytes")
    int8 = as_number(int8_bytes, "int8_bytes")
    want = predicted_file_bytes()

    def holds(value, target):  # a file holds its weights and a little framing: never exactly the weights
        return target < value <= target * (1 + FILE_TOLERANCE)

    if holds(fp32, want["fp32"]) and holds(int8, want["int8"]):
        return verdict(True, T6, f"fp32 {fp32 / budget.MIB:.1f} MiB, int8 {int8 / budget.MIB:.1f} MiB "
                                 f"({fp32 / int8:.2f}x smaller)")
    if holds(int8, want["fp32"]) and holds(fp32, want["int8"]):
        return verdict(False, T6, "the two sizes are swapped", ["which file holds 8-bit weights?"])
    hints = [mistakes.file_size_mistake(value, target, name, want, holds, FILE_TOLERANCE)
             for value, target, name in ((fp32, want["fp32"], "fp32_bytes"), (int8, want["int8"], "int8_bytes"))
             if not holds(value, target)]
    return verdict(False, T6, "not the measured sizes yet", hints)


# --------------------------------------------------------------------------------------------------
# Task 7: what stays fp32, and the int8 file it predicts

T7 = "Task 7 (what stays fp32)"


def kept_in_fp32() -> int:
    """DistilBERT's parameters that ``quantize_dynamic`` leaves in fp32: the embedding tables, the linear
    layers' biases and the LayerNorms (everything but the linear weights)."""
    split = distilbert_split()
    return split["embedding tables"] + split["other"]


@guarded(T7, files=("int8_bytes",))
def check_int8_prediction(kept_fp32, int8_predicted_bytes, int8_bytes) -> bool:
    """``kept_fp32``: the parameters that stay 32-bit; ``int8_predicted_bytes``: the int8 file predicted
    from the counts (linear weights at one byte, the kept parameters at four), which the measured
    ``int8_bytes`` of task 6 must hold with no more than the file's framing on top."""
    kept = as_number(kept_fp32, "kept_fp32", integer=True)
    predicted = as_number(int8_predicted_bytes, "int8_predicted_bytes")
    measured = as_number(int8_bytes, "int8_bytes")
    split, want = distilbert_split(), predicted_file_bytes()["int8"]
    if kept != kept_in_fp32():
        return verdict(False, T7, "not the number of parameters that stay fp32",
                       [mistakes.kept_mistake(kept, split)])
    if predicted == measured:
        return verdict(False, T7, "`int8_predicted_bytes` is the measured size itself", [
            "predict the file from the counts: the linear weights at 1 byte, the kept parameters at 4"])
    if not close(predicted, want, 1e-6):
        hint = mistakes.int8_prediction_mistake(predicted, want, kept + split["linear weights"])
        return verdict(False, T7, "not the size those counts predict", [hint])
    if not want < measured <= want * (1 + FILE_TOLERANCE):
        return verdict(False, T7, "the prediction is right, but `int8_bytes` is not the int8 file of task 6", [
            "measure the file of `distilbert_int8` in task 6 and run its cells again"])
    share, extra = kept * 4 / want, (measured - want) / 1024
    return verdict(True, T7, f"{kept:,} parameters stay fp32, {share:.0%} of the int8 file's bytes; "
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


@guarded(T8, files=("int8_all_bytes",))
def check_embedding_quantization(int8_all_bytes) -> bool:
    """Bytes of the file of DistilBERT with int8 linear layers *and* 8-bit embedding tables."""
    value = as_number(int8_all_bytes, "int8_all_bytes")
    want = predicted_file_bytes()
    target = want["int8 + embeddings"]
    if target < value <= target * (1 + FILE_TOLERANCE):
        return verdict(True, T8, f"{value / budget.MIB:.1f} MiB with 8-bit embeddings "
                                 f"({want['fp32'] / value:.2f}x under fp32)")
    return verdict(False, T8, "not the size with int8 embeddings yet",
                   [mistakes.embedding_file_mistake(value, target, want, FILE_TOLERANCE)])


@guarded(T8b)
def check_speedup(ratio) -> bool:
    """A measured speed ratio, slower model's time over faster model's time (machine-dependent).

    Timings vary, so the check asks only for a plausible ratio above 1: below 1 means the ratio was
    taken the wrong way round, and a value above 20 means something other than time was divided.
    """
    value = as_number(ratio, "ratio")
    if value <= 0:
        return verdict(False, T8b, "not a speed ratio", ["divide one positive time by another"])
    if value < 1:
        return verdict(False, T8b, "the ratio is upside down",
                       ["divide the slower model's time by the faster one's, so the ratio is above 1"])
    if value > 20:
        return verdict(False, T8b, "implausibly large", [
            "time each model on the same inputs, after a warm-up call, and divide the times"])
    return verdict(True, T8b, f"{value:.1f}x faster on this machine (timings vary; not compared)")


# --------------------------------------------------------------------------------------------------
# Task 10: a model whose word table dominates

T10 = "Task 10 (multilingual DistilBERT)"


def multilingual_expected() -> dict:
    """Multilingual DistilBERT's parameter count, and the bytes of its weights in fp32 and with int8
    linear layers (:func:`quantization.predicted_bytes`)."""
    config = _config(MULTILINGUAL)
    return {"count": budget.count(config), "fp32": quantization.predicted_bytes(config),
            "int8": quantization.predicted_bytes(config, linear_bits=8)}


@guarded(T10, files=("multilingual_int8_bytes",))
def check_multilingual(multilingual_count, multilingual_int8_bytes, multilingual_saving) -> bool:
    """``multilingual_count``: multilingual DistilBERT's parameters; ``multilingual_int8_bytes``: the file of
    its state_dict with int8 linear layers; ``multilingual_saving``: the share of the fp32 size (4 bytes a
    parameter) that the int8 file saves, computed from the student's own measurement."""
    count = as_number(multilingual_count, "multilingual_count", integer=True)
    size = as_number(multilingual_int8_bytes, "multilingual_int8_bytes")
    saving = as_number(multilingual_saving, "multilingual_saving")
    want = multilingual_expected()
    if count != want["count"]:
        return verdict(False, T10, "not multilingual DistilBERT's parameter count",
                       [mistakes.multilingual_count_mistake(count, expected_counts()[0])])
    if not want["int8"] < size <= want["int8"] * (1 + FILE_TOLERANCE):
        return verdict(False, T10, "not the int8 file's size yet",
                       [mistakes.multilingual_file_mistake(size, want, FILE_TOLERANCE)])
    right = 1 - size / (4 * count)
    if abs(saving - right) > FILE_TOLERANCE:
        return verdict(False, T10, "not the share int8 saves",
                       [mistakes.saving_mistake(saving, right, FILE_TOLERANCE)])
    distil = predicted_file_bytes()
    return verdict(True, T10, f"int8 linear layers save {saving:.0%} of multilingual DistilBERT, against "
                              f"{1 - distil['int8'] / distil['fp32']:.0%} of DistilBERT: its word table "
                              f"stays 32-bit")
