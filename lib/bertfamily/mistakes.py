"""The usual mistakes behind a wrong answer of the exercise, each named by the hint a check prints.

A check of :mod:`bertfamily.checks` decides whether an answer is right. Where it is not, a function
here looks for the mistake that explains it (a count that includes the masked-LM head, a size in
MiB where bytes were asked, a ratio upside down, the file of the wrong model...) and returns the
hint that points at it without giving the number away; where no usual mistake fits, a hint that
says how the answer is computed. Each takes the answer and what the check expects, as the check
computed it: the expected values stay in :mod:`bertfamily.checks`.
"""

from __future__ import annotations

from bertfamily import budget
from bertfamily.answers import close


def model_mistake(model, name: str, want: str, expected) -> str | None:
    """Why ``model`` is not the bare encoder of the checkpoint ``want`` (whose configuration is
    ``expected``), or None."""
    kind, cls = getattr(getattr(model, "config", None), "model_type", None), type(model).__name__
    if kind != expected.model_type:
        return f"`{name}` is a {cls} (model type {kind!r}); load {want!r}"
    if cls.endswith(("ForMaskedLM", "ForSequenceClassification", "ForPreTraining")):
        return f"`{name}` is a {cls}, a model with a task head: the exercise counts the bare encoder (AutoModel)"
    if getattr(model, "pooler", "absent") is None:  # BertModel(add_pooling_layer=False) holds None there
        return (
            f"`{name}` is the encoder without its pooler (add_pooling_layer=False, or the "
            "encoder of a masked-LM model): the exercise counts the bare encoder that "
            "AutoModel loads, pooler included"
        )
    layers_key = "n_layers" if kind == "distilbert" else "num_hidden_layers"
    for key in (layers_key, "vocab_size"):
        if getattr(model.config, key, None) != getattr(expected, key):
            return (
                f"`{name}` has {key} = {getattr(model.config, key, None)}, not the "
                f"configuration of {want!r}: load that checkpoint by its name"
            )
    return None


def count_mistake(value: int, target: int, name: str, model: str, config) -> str:
    """The usual mistake behind a wrong parameter count of ``model`` (configuration ``config``)."""
    H = getattr(config, "hidden_size", None) or config.dim
    mlm = budget.count(config, mlm_head=True)
    if config.model_type == "bert" and value == target - (H * H + H):
        return (
            f"`{name}` is short by exactly one H x H layer and its bias: BERT-base's pooler, "
            "which DistilBERT does not have; count the model AutoModel loads, pooler included"
        )
    if value == mlm:
        return f"`{name}` counts a model with the masked-LM head: count the bare encoder"
    if value == mlm + budget.tied_decoder(config) or value == target + budget.tied_decoder(config):
        return (
            f"`{name}` counts a tied matrix twice: summing state_dict() lists the decoder "
            "and the word embeddings separately although they are one tensor; sum over "
            "model.parameters()"
        )
    if 0 < value < 1000:
        return (
            f"`{name}` = {value} looks like the number of weight tensors, not of the numbers "
            "in them: add up each tensor's numel()"
        )
    if close(value * 1e6, target, 0.01) or close(value * 1e9, target, 0.01):
        return f"`{name}` looks rounded to millions or billions: give the exact count"
    return f"`{name}` is not the count of the {model} encoder: sum p.numel() over model.parameters()"


def reduction_mistake(value: float, target: float, tol: float, without_pooler: float | None = None) -> str:
    """The usual mistake behind a wrong reduction (``target``: the fraction DistilBERT removes;
    ``without_pooler``: the fraction computed from a BERT-base count without its pooler)."""
    kept = 1 - target
    if without_pooler is not None and abs(value - without_pooler) <= tol:
        return (
            "the reduction from a BERT-base without its pooler: the counts of tasks 1 and 2 need the bare "
            "encoder that AutoModel loads, pooler included; then this follows"
        )
    if abs(value - 100 * target) <= 100 * tol:
        return "that is a percentage: give the fraction (between 0 and 1); format it as % when printing"
    if abs(value - kept) <= tol or abs(value - 100 * kept) <= 100 * tol:
        return "that is the fraction DistilBERT keeps; the question is how much it removes"
    if abs(value - 1 / kept) <= 1e-3 or abs(value - (1 / kept - 1)) <= 1e-3:
        return "the ratio is upside down: divide by BERT-base's count, the model you start from"
    if abs(value - target) <= 0.01:
        return "close, but rounded too early: compute with the exact counts and round only when printing"
    if value < 0:
        return "a negative reduction: the ratio is upside down"
    if 1 < value <= 100:
        return (
            "a reduction above 1 looks like a percentage: give the fraction (between 0 and 1), "
            "and check the counts of task 2"
        )
    return "compare the two counts of task 2: what share of BERT-base's parameters is gone?"


def predicted_size_mistake(key: str, value: float, bits: int, count: int, bert_count: int, tol: float) -> str:
    """The usual mistake behind a wrong size ``key`` in MiB of ``count`` parameters at ``bits``."""
    target = budget.to_mib(count, bits)
    if close(value, target * budget.MIB / 1e6, tol):
        return f"`{key}` is in MB (10**6 bytes); a MiB is 2**20 bytes"
    if close(value, target * 8, tol):
        return f"`{key}` counts bits, not bytes: a byte is 8 bits"
    if close(value, target * 1024, tol):
        return f"`{key}` looks like KiB: divide by 2**20 bytes, not 2**10"
    if close(value, target / 1024, tol):
        return f"`{key}` looks like GiB: the task asks for MiB (2**20 bytes)"
    if any(close(value, budget.to_mib(count, b), tol) for b in (1, 2, 4, 16, 64) if b != bits):
        return (
            f"`{key}` uses the wrong number of bytes per parameter: how many bytes "
            f"does {'an' if bits == 8 else 'a'} {bits}-bit number take?"
        )
    if close(value, budget.to_mib(bert_count, bits), tol):
        return f"`{key}` is BERT-base's size: the task asks about DistilBERT"
    return (
        f"`{key}`: multiply the parameter count by the bytes per parameter at "
        f"{bits} bits, then divide by the bytes in a MiB"
    )


def factor_mistake(value: float, target: float, distil: int, bert: int, tol: float) -> str:
    """The usual mistake behind a wrong factor between fp32 BERT-base and int8 DistilBERT."""
    if close(value, 1 / target, tol):
        return "the ratio is upside down: the factor says how many times smaller, so it is above 1"
    if close(value, bert / distil, tol):
        return "that is distillation alone: include the bits (32 down to 8) as well"
    if close(value, 4.0, tol):
        return "that is quantisation alone: include the parameters distillation removed as well"
    if close(value, target / 2, tol) or close(value, target * 2, tol):
        return "check the bytes per parameter at 32 and at 8 bits"
    return "divide the bytes of fp32 BERT-base by the bytes of int8 DistilBERT"


def unit_mistake(value, target, name: str, tol: float) -> str | None:
    """A measured size ``value`` that is ``target`` bytes in other units (MiB, MB, bits), or None."""
    if close(value * budget.MIB, target, tol):
        return f"`{name}` is in MiB: the task asks for the file size in bytes (os.path.getsize)"
    if close(value * 1e6, target, tol):
        return f"`{name}` is in MB: the task asks for the file size in bytes (os.path.getsize)"
    if close(value, 8 * target, tol):
        return f"`{name}` counts bits: give bytes"
    return None


def file_size_mistake(value, target, name: str, want: dict, holds, tol: float) -> str:
    """The usual mistake behind a wrong measured file (``want``: the predicted bytes of each model;
    ``holds(value, target)``: whether a file of ``value`` bytes holds ``target`` bytes of weights)."""
    hint = unit_mistake(value, target, name, tol)
    if hint is None and name == "int8_bytes" and holds(value, want["fp32"]):
        hint = (
            "the int8 file is as big as the fp32 one: did you save the quantised model "
            "(`distilbert_int8`), not the original?"
        )
    if hint is None and name == "fp32_bytes" and holds(value, want["int8"]):
        hint = (
            "the fp32 file is as small as the int8 one: was `distilbert` quantised in place? "
            "Reload it and save its state_dict"
        )
    if hint is None and name == "int8_bytes" and holds(value, want["int8 + embeddings"]):
        hint = "that file has int8 embeddings too (the stretch task): here quantise only the linear layers"
    if hint is None and value == target:
        hint = (
            f"`{name}` is the size predicted from the counts, to the byte: a file also holds "
            "torch.save's framing, so measure it (os.path.getsize)"
        )
    if hint is None and 0 < value < target:
        hint = (
            f"`{name}` is smaller than the weights the file must hold: save the whole "
            "state_dict() with torch.save, then measure the file"
        )
    return hint or (
        f"`{name}`: save model.state_dict() with torch.save to a file and take os.path.getsize of that file"
    )


def kept_mistake(kept: int, split: dict) -> str:
    """The usual mistake behind a wrong count of the parameters ``quantize_dynamic`` leaves in fp32."""
    if kept == split["embedding tables"]:
        return "the embedding tables stay fp32, and so do two smaller kinds of parameter: which?"
    if kept == split["other"]:
        return "the biases and LayerNorms stay fp32: and which large tables are not nn.Linear at all?"
    if kept == split["linear weights"]:
        return "that is what quantize_dynamic converted to int8: count what it left alone"
    return (
        "count the parameters that are not the weight matrix of an nn.Linear "
        "(sum p.numel() over the model's parameters, less the linear weights)"
    )


def int8_prediction_mistake(predicted: float, want: int, total: int) -> str:
    """The usual mistake behind a wrong int8 file predicted from the counts (``total``: all parameters)."""
    if close(predicted, total, 1e-6):
        return "that is task 4's 8-bit size: the parameters that stay fp32 take 4 bytes each"
    if close(predicted * budget.MIB, want, 1e-3):
        return "`int8_predicted_bytes` is in MiB: give bytes"
    return "the linear weights at 1 byte each plus the parameters that stay fp32 at 4 bytes each"


def embedding_file_mistake(value, target, want: dict, tol: float) -> str:
    """The usual mistake behind a wrong file of DistilBERT with int8 embeddings too."""
    hint = unit_mistake(value, target, "int8_all_bytes", tol)
    if hint is None and want["int8"] <= value <= want["int8"] * (1 + tol):
        hint = (
            "that is the file with int8 linear layers only: give quantize_dynamic a qconfig for "
            "nn.Embedding too (float_qparams_weight_only_qconfig)"
        )
    if hint is None and value == target:
        hint = "that is the size predicted from the counts, to the byte: save the model and measure its file"
    if hint is None and value < target:
        hint = "smaller than the 8-bit tables must be: save the whole state_dict() and measure the file"
    return hint or ("map nn.Linear and nn.Embedding to their qconfigs, save the state_dict, then take os.path.getsize")


def multilingual_count_mistake(count: int, distilbert_count: int) -> str:
    """The usual mistake behind a wrong parameter count of multilingual DistilBERT."""
    if count == distilbert_count:
        return "that is DistilBERT's count: load distilbert-base-multilingual-cased"
    return "sum p.numel() over multilingual.parameters(), before you quantise it"


def multilingual_file_mistake(size, want: dict, tol: float) -> str:
    """The usual mistake behind a wrong int8 file of multilingual DistilBERT."""
    hint = unit_mistake(size, want["int8"], "multilingual_int8_bytes", tol)
    if hint is None and want["fp32"] < size <= want["fp32"] * (1 + tol):
        hint = (
            "that file is as big as the fp32 model: quantize_dynamic(..., inplace=True) changes the "
            "model itself; without inplace, save the model it returns"
        )
    if hint is None and size == want["int8"]:
        hint = "that is the size predicted from the counts, to the byte: save the model and measure its file"
    return hint or "quantise the nn.Linear layers to qint8, torch.save the state_dict, then os.path.getsize"


def saving_mistake(saving: float, right: float, tol: float) -> str:
    """The usual mistake behind a wrong share of the fp32 size that an int8 file saves."""
    if abs(saving - 100 * right) <= 100 * tol:
        return "`multilingual_saving` is in percent: give a fraction between 0 and 1"
    if abs(saving - (1 - right)) <= tol:
        return "that is the share the int8 file keeps: the saving is what it no longer needs"
    if saving > 1:
        return "that looks like a ratio of sizes: the saving is 1 - int8 size / fp32 size"
    return "1 - (the int8 file's bytes) / (4 bytes times the parameter count)"
