"""Real int8: quantise a model's linear layers (and optionally its embeddings), weigh the file, time it.

Three questions a reader asks of a compressed model, each answered the way a user would answer it:

* :func:`quantize_linear`: what does int8 look like in torch? Dynamic quantisation
  (``torch.ao.quantization.quantize_dynamic``) stores every ``nn.Linear`` weight as int8 with one scale
  and zero point per matrix and quantises the activations on the fly at each call; the biases stay
  fp32. Everything else (embedding tables, LayerNorms) is untouched unless ``embeddings=True``, which
  also stores each ``nn.Embedding`` as 8-bit rows with a float scale and offset per row
  (``float_qparams_weight_only_qconfig``).
* :func:`quantize_torchao`: the same arithmetic with ``torchao``, the package torch's deprecation
  warnings point to. :func:`quantize_linear` uses it by itself on a torch without
  ``torch.ao.quantization``, and says so; the copy's ``quantized_with`` names the path that ran.
  torchao's path needs torchao :data:`MIN_TORCHAO` or newer; with an older one (Colab ships 0.10.0)
  or none, :func:`quantize_torchao` falls back to ``quantize_dynamic`` and warns.
  :func:`torchao_path` says in one sentence which path this machine takes (lesson 3 prints it).
* :func:`serialized_bytes` / :func:`serialized_mib`: how big is the file? ``torch.save(state_dict)``,
  measured on disk or in a memory buffer, packing, scales and pickle overhead included.
* how fast is it? :mod:`bertfamily.timing` times models (warm-up calls, then the median of several
  timed calls, several models in turn, run by run, so that a noisy neighbour slows them all alike);
  lesson 3 times its models with :mod:`bertfamily.unpinned`, in a fresh process with unpinned kernels.

:func:`linear_split` and :func:`predicted_bytes` give the *prediction* from the configuration alone
(with :mod:`bertfamily.budget`), to set beside the measured file size.
"""
from __future__ import annotations

import copy
import importlib.metadata
import io
import os
import warnings
from collections import OrderedDict
from collections.abc import Mapping

import torch
from torch import nn

from bertfamily import budget
from bertfamily.quiet import import_torchao, quiet_deprecation
from bertfamily.timing import check_module

#: The two paths to int8: torch's own eager-mode API, and the torchao package that replaces it.
EAGER = "torch.ao.quantization.quantize_dynamic"
TORCHAO = "torchao.quantization.quantize_"

try:
    with quiet_deprecation():  # importing torch.ao.quantization itself warns (see quantize_linear)
        from torch.ao.nn.quantized import Embedding as _QuantizedEmbedding
        from torch.ao.quantization import (
            default_dynamic_qconfig,
            float_qparams_weight_only_qconfig,
            per_channel_dynamic_qconfig,
            quantize_dynamic,
        )
except ImportError:  # a torch without eager-mode quantisation: quantize_linear goes through torchao
    quantize_dynamic = None
else:
    class ContiguousQuantizedEmbedding(_QuantizedEmbedding):
        """torch's int8 embedding table, accepting non-contiguous indices.

        torch's int8 embedding kernel refuses strided index tensors, and BERT's default
        ``token_type_ids`` is a broadcast (``expand``-ed) view of a buffer; this subclass makes the
        indices contiguous first.
        """

        def forward(self, indices):
            return super().forward(indices.contiguous())


def _check_flags(model, **flags) -> None:
    check_module(model)
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be True or False, got {flag!r}")
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ValueError("quantize_linear needs a model on the CPU (torch's int8 kernels are CPU-only)")


def quantize_linear(model: nn.Module, embeddings: bool = False,
                    per_channel: bool = False) -> nn.Module:
    """A quantised *copy* of ``model``: int8 linear layers, optionally int8 embedding tables.

    Every ``nn.Linear`` becomes a dynamically quantised linear layer (``torch.qint8`` weights, one
    scale per matrix, or one per output row with ``per_channel=True``; activations quantised at run
    time; fp32 bias). With ``embeddings=True`` every ``nn.Embedding`` also becomes a weight-only
    8-bit table with per-row float scale and zero point.
    ``model`` itself is left untouched (it is deep-copied first), so the fp32 and int8 versions can be
    compared side by side. Quantised modules run on CPU only.

    About the warnings: torch 2.13 still ships eager-mode quantisation (``torch.ao.quantization``)
    and it works, but every call warns that the API is deprecated in favour of the separate
    ``torchao`` package (``torchao.quantization.quantize_``), and that quantised tensor dtypes
    (``torch.qint8``...) will be removed in a future release. The arithmetic this lesson measures
    (int8 weights, one scale per matrix or per row) is the same in both; we use the built-in API so
    that nothing beyond torch is needed, and silence exactly those two warnings here, once, rather than
    print them on every call. On a torch where that API is gone, :func:`quantize_torchao` does the
    work instead, with a warning that says so; ``quantized_with`` on the copy names the path.
    """
    _check_flags(model, embeddings=embeddings, per_channel=per_channel)
    if quantize_dynamic is None:
        warnings.warn(f"this torch ({torch.__version__}) has no "
                      f"torch.ao.quantization: quantised with torchao "
                      f"({TORCHAO}) instead", stacklevel=2)
        return quantize_torchao(model, embeddings=embeddings,
                                per_channel=per_channel)
    with quiet_deprecation():
        if per_channel:
            spec = {nn.Linear: per_channel_dynamic_qconfig}
        else:
            spec = {nn.Linear: default_dynamic_qconfig}
        if embeddings:
            spec[nn.Embedding] = float_qparams_weight_only_qconfig
        quantized = quantize_dynamic(copy.deepcopy(model), spec,
                                     dtype=torch.qint8, inplace=True)
    if embeddings:
        for module in quantized.modules():
            if type(module) is _QuantizedEmbedding:
                module.__class__ = ContiguousQuantizedEmbedding
    quantized.eval()
    quantized.quantized_with = EAGER
    return quantized


#: The oldest torchao the torchao path runs on: it uses ``Int8DynamicActivationInt8WeightConfig``'s
#: ``granularity`` and ``IntxWeightOnlyConfig``, which torchao 0.10.0 (Colab's) lacks; 0.18 is the
#: release it was written and tested with.
MIN_TORCHAO = "0.18"


def torchao_version() -> str | None:
    """The installed torchao's version, read from its metadata without importing it; None if absent."""
    try:
        return importlib.metadata.version("torchao")
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, ...]:
    """``"0.18.0+cpu"`` -> ``(0, 18, 0)``: the numeric release, for comparing versions."""
    from packaging.version import InvalidVersion, Version
    try:
        return Version(version).release
    except InvalidVersion:
        return (0,)


def torchao_usable(version: str | None = None) -> bool:
    """True when torchao ``version`` (default: the installed one) is :data:`MIN_TORCHAO` or newer."""
    version = torchao_version() if version is None else version
    return version is not None and _release(version) >= _release(MIN_TORCHAO)


def torchao_path() -> str:
    """One sentence saying which path :func:`quantize_torchao` takes on this machine, and why.

    ``"torchao 0.18 or newer is installed: quantize_torchao quantises with torchao
    (torchao.quantization.quantize_)."`` (the same words for every such release, so that a committed
    output reproduces), or, with Colab's torchao 0.10.0, that it is older than :data:`MIN_TORCHAO` and
    ``quantize_torchao`` falls back to ``torch.ao.quantization.quantize_dynamic``, the path of
    :func:`quantize_linear`.
    """
    version = torchao_version()
    if torchao_usable(version):
        return f"torchao {MIN_TORCHAO} or newer is installed: quantize_torchao quantises with torchao ({TORCHAO})."
    why = ("torchao is not installed" if version is None
           else f"torchao {version} is older than {MIN_TORCHAO}, the first release this course's torchao path runs on")
    if quantize_dynamic is None:
        return f"{why}, and this torch ({torch.__version__}) has no torch.ao.quantization: no int8 path here."
    return (f"{why}: quantize_torchao falls back to torch's own {EAGER}, the path of quantize_linear "
            f"(the two int8 copies are then the same).")


def quantize_torchao(model: nn.Module, embeddings: bool = False, per_channel: bool = False) -> nn.Module:
    """:func:`quantize_linear`'s int8 with ``torchao.quantization.quantize_`` (a quantised copy).

    Every ``nn.Linear`` gets ``Int8DynamicActivationInt8WeightConfig``: int8 weights with one scale
    per matrix (per output row with ``per_channel=True``), activations quantised at each call with
    one scale and zero point per call, the bias fp32, as ``quantize_dynamic`` does. With
    ``embeddings=True`` every ``nn.Embedding`` gets ``IntxWeightOnlyConfig``: 8-bit rows with a scale
    and zero point each. torchao keeps ``nn.Linear`` and swaps its weight for an int8 tensor
    subclass; ``torch.save`` stores the int8 values and scales. Its int8 matrix product
    (``torch._int_mm``) has no fast CPU kernel in eager mode: lesson 3 measures it.

    With a torchao older than :data:`MIN_TORCHAO` (Colab's 0.10.0) or none, and a torch that still has
    ``torch.ao.quantization``, the copy is :func:`quantize_linear`'s, with a warning that says so
    (:func:`torchao_path`'s sentence); its ``quantized_with`` names the path that ran.
    """
    _check_flags(model, embeddings=embeddings, per_channel=per_channel)
    if not torchao_usable() and quantize_dynamic is not None:
        warnings.warn(torchao_path(), stacklevel=2)
        return quantize_linear(model, embeddings=embeddings, per_channel=per_channel)
    if not torchao_usable():
        raise ImportError(f"{torchao_path()} Install torchao: `pip install 'torchao>={MIN_TORCHAO}'`")
    ao = import_torchao(f"torchao>={MIN_TORCHAO}")
    quantized = copy.deepcopy(model)
    weights = ao.PerRow() if per_channel else ao.PerTensor()
    ao.quantize_(quantized, ao.Int8DynamicActivationInt8WeightConfig(
        granularity=[ao.PerTensor(), weights], act_mapping_type=ao.MappingType.ASYMMETRIC,
        set_inductor_config=False), filter_fn=lambda module, _: isinstance(module, nn.Linear))
    if embeddings:
        ao.quantize_(quantized, ao.IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=ao.PerAxis(0),
                                                        mapping_type=ao.MappingType.ASYMMETRIC),
                     filter_fn=lambda module, _: isinstance(module, nn.Embedding))
    quantized.eval()
    quantized.quantized_with = TORCHAO
    return quantized


def _state_dict(model_or_state_dict) -> Mapping:
    if isinstance(model_or_state_dict, nn.Module):
        return model_or_state_dict.state_dict()
    if isinstance(model_or_state_dict, Mapping):
        return model_or_state_dict
    raise ValueError("expected a torch.nn.Module or a state_dict (a mapping of names to tensors), "
                     f"got {type(model_or_state_dict).__name__}")


def serialized_bytes(model_or_state_dict, path: str | os.PathLike | None = None) -> int:
    """Bytes of ``torch.save(state_dict)``: written to ``path`` if given, else to a memory buffer.

    This is the size a user sees on disk, with everything a file carries: packed int8 weights, their
    scales and zero points, the fp32 tensors left as they were, and the pickle/zip framing. A file
    and a buffer differ by a few dozen bytes per tensor (the zip records are framed differently when
    torch writes to a stream), well under 0.1% of a BERT-sized model.
    """
    state = _state_dict(model_or_state_dict)
    with quiet_deprecation():
        if path is not None:
            torch.save(state, path)
            return os.path.getsize(path)
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return buffer.getbuffer().nbytes


def serialized_mib(model_or_state_dict, path: str | os.PathLike | None = None) -> float:
    """:func:`serialized_bytes` in mebibytes (2**20 bytes)."""
    return serialized_bytes(model_or_state_dict, path) / budget.MIB


def linear_split(config) -> OrderedDict:
    """The budget of ``config`` split by what dynamic quantisation does to each part.

    ``linear weights`` (the matrices ``quantize_dynamic`` turns into int8), ``linear biases`` (kept
    fp32), ``embeddings`` (the word, position and segment tables: int8 only with ``embeddings=True``)
    and ``other`` (LayerNorms and anything else, always fp32). The four add up to
    :func:`bertfamily.budget.count` of the base model (no MLM head).
    """
    s = budget.sizes(config)
    V, P, T, H, I, E = s.vocab, s.positions, s.segments, s.hidden, s.intermediate, s.embedding
    copies = 1 if s.shared else s.layers
    weights = copies * (4 * H * H + 2 * H * I)
    biases = copies * (4 * H + I + H)
    if E != H:  # ALBERT's embedding projection is a Linear layer
        weights += E * H
        biases += H
    if s.pooler:
        weights += H * H
        biases += H
    tables = (V + P + T) * E
    total = budget.count(config)
    return OrderedDict([("linear weights", weights), ("linear biases", biases),
                        ("embeddings", tables), ("other", total - weights - biases - tables)])


def predicted_bytes(config, linear_bits: int = 32, embedding_bits: int = 32) -> int:
    """Bytes of the weights alone, predicted from the configuration: the file minus its overhead.

    Linear weight matrices at ``linear_bits``, embedding tables at ``embedding_bits``, everything else
    (biases, LayerNorms) at 32 bits. ``linear_bits=8`` predicts :func:`quantize_linear`;
    ``embedding_bits=8`` adds ``embeddings=True`` (whose per-row scale and zero point, 8 bytes a row,
    are counted too). Scales of the linear layers, the zip/pickle framing and alignment padding
    are not: they are what the measured file adds to this prediction.
    """
    for name, bits in (("linear_bits", linear_bits), ("embedding_bits", embedding_bits)):
        if bits not in (8, 32):
            raise ValueError(f"{name} must be 8 (int8) or 32 (fp32), got {bits!r}")
    split = linear_split(config)
    n = (budget.to_bytes(split["linear weights"], linear_bits)
         + budget.to_bytes(split["linear biases"] + split["other"], 32)
         + budget.to_bytes(split["embeddings"], embedding_bits))
    if embedding_bits == 8:
        s = budget.sizes(config)
        n += 8 * (s.vocab + s.positions + s.segments)  # a float32 scale and a float32 zero point per row
    return n


#: The reference of :func:`size_calculator`'s factor: BERT-base (bert-base-uncased) in fp32.
REFERENCE = "bert-base-uncased"


def size_calculator(layers: int = 6, hidden: int = 768, vocab: int = 30522, bits: int = 8,
                    layout: str = "distilbert") -> OrderedDict:
    """Parameters, MiB and the compression factor against BERT-base fp32 of a BERT-shaped model.

    ``layout="distilbert"`` has no segment table and no pooler, ``layout="bert"`` has both; the
    feed-forward width is ``4 * hidden``, heads of 64 dimensions, 512 positions, as in BERT. Every
    parameter is stored at ``bits`` (a budget, not a file: see :func:`predicted_bytes` for what
    torch's int8 really stores). The factor is ``bytes(BERT-base, 32 bits) / bytes(this model)``.
    """
    from transformers import BertConfig, DistilBertConfig

    from bertfamily.models import published_config

    for name, value, low in (("layers", layers, 1), ("hidden", hidden, 64), ("vocab", vocab, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if hidden % 64:
        raise ValueError(f"hidden must be a multiple of 64 (heads of 64 dimensions), got {hidden}")
    if layout == "distilbert":
        config = DistilBertConfig(n_layers=layers, dim=hidden, hidden_dim=4 * hidden,
                                  n_heads=hidden // 64, vocab_size=vocab)
    elif layout == "bert":
        config = BertConfig(num_hidden_layers=layers, hidden_size=hidden,
                            intermediate_size=4 * hidden, num_attention_heads=hidden // 64,
                            vocab_size=vocab)
    else:
        raise ValueError(f"layout must be 'distilbert' or 'bert', got {layout!r}")
    n = budget.count(config)
    size = budget.to_bytes(n, bits)  # validates bits
    reference = budget.to_bytes(budget.count(published_config(REFERENCE)), 32)
    return OrderedDict([("parameters", n), ("mib", size / budget.MIB), ("factor", reference / size)])
