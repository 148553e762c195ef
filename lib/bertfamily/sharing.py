"""ALBERT's two savings, and what they do not save.

* **Factorised embeddings.** BERT's word table is ``V x H``. ALBERT looks tokens up in a narrow
  table ``V x E`` and projects to the model's width with an ``E x H`` matrix: ``V*E + E*H``
  parameters instead of ``V*H`` (:func:`embedding_parameters`). Below the break-even width
  ``E = VH / (V + H)`` the factorisation is smaller (:func:`break_even_embedding_size`).
* **Cross-layer sharing.** ALBERT's encoder holds *one* layer and applies it ``L`` times.
  :func:`distinct_parameters` counts the tensors (and elements) a model stores, each once;
  :func:`layer_applications` records which parameter tensors each application of an encoder
  layer used during a real forward pass, so one can see twelve applications of one layer.
* **Compute is not memory.** :func:`encoder_macs` counts the multiply-adds of a forward pass with
  pen and paper; :func:`measured_macs` measures them with ``torch.utils.flop_counter``. Sharing
  divides the layers' stored parameters by ``L`` and leaves the multiply-adds where they were.
  :func:`bertfamily.timing.forward_latency` times forward passes, :func:`at_depth` runs a model with
  fewer layers.
* :func:`tiny_albert` builds the same small ALBERT masked-LM with its layers shared or not
  (``num_hidden_groups`` 1 or ``L``), for tests and experiments; :func:`unshared` does the same to
  any ALBERT config.

Every parameter count, and every reading of a config's sizes (:class:`bertfamily.budget.Sizes`),
goes through :mod:`bertfamily.budget`.
"""
from __future__ import annotations

import contextlib
import copy
from collections import OrderedDict

import torch

from . import budget
from .timing import positive_int

#: Encoder-layer classes that :func:`layer_applications` looks for when none is given.
LAYER_CLASSES = ("AlbertLayer", "BertLayer", "RobertaLayer", "XLMRobertaLayer", "TransformerBlock")


# --------------------------------------------------------------------------- factorised embeddings

def embedding_parameters(vocab_size: int, hidden_size: int,
                         embedding_size: int | None = None,
                         bias: bool = False) -> int:
    """Parameters of the word-embedding path from token id to a vector of width ``hidden_size``.

    Without ``embedding_size`` (or with ``embedding_size == hidden_size``): BERT's ``V x H`` table.
    With it: ALBERT's ``V x E`` table plus the ``E x H`` projection (``bias`` adds the projection's
    ``H`` biases, which ALBERT has).
    """
    V = positive_int(vocab_size, "vocab_size")
    H = positive_int(hidden_size, "hidden_size")
    if embedding_size is None or embedding_size == H:
        return V * H
    E = positive_int(embedding_size, "embedding_size")
    return V * E + E * H + (H if bias else 0)


def break_even_embedding_size(vocab_size: int, hidden_size: int) -> float:
    """The width ``E = VH / (V + H)`` at which ``V*E + E*H`` equals ``V*H``; smaller E saves."""
    V = positive_int(vocab_size, "vocab_size")
    H = positive_int(hidden_size, "hidden_size")
    return V * H / (V + H)


# --------------------------------------------------------------------------- counting what is stored

def distinct_parameters(model) -> dict:
    """What a model stores: distinct parameter tensors and elements, each storage counted once.

    ``names`` is how many parameter names the model has (a module reached twice is listed under both
    names), ``tensors`` how many distinct storages those names point to, ``elements`` the numbers
    stored. Tied or shared tensors are counted once, as ``model.parameters()`` does.
    """
    named = list(model.named_parameters(remove_duplicate=False))
    if not named:
        raise ValueError("the model has no parameters")
    storages = {}
    for _, p in named:
        storages.setdefault((p.untyped_storage().data_ptr(), p.storage_offset(), tuple(p.shape)), p.numel())
    return {"names": len(named), "tensors": len(storages), "elements": sum(storages.values())}


def layer_applications(model, inputs: dict, layer_class=None) -> list:
    """Run ``model(**inputs)`` and record, for each application of an encoder layer, its tensors.

    Returns one entry per call of a module of ``layer_class`` (default: any class named in
    :data:`LAYER_CLASSES`), in call order: the frozenset of the ``data_ptr`` of every parameter the
    layer holds. BERT-base gives twelve different sets; ALBERT-base gives the same set twelve times.
    """
    if layer_class is None:
        layers = [m for m in model.modules() if type(m).__name__ in LAYER_CLASSES]
    else:
        layers = [m for m in model.modules() if isinstance(m, layer_class)]
    if not layers:
        raise ValueError(f"no encoder layer found: the model has none of {', '.join(LAYER_CLASSES)}; "
                         "pass layer_class=")
    calls = []
    hooks = [m.register_forward_hook(
        lambda mod, args, out: calls.append(frozenset(p.data_ptr() for p in mod.parameters())))
        for m in set(layers)]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in hooks:
            h.remove()
    return calls


# --------------------------------------------------------------------------- configurations

def with_depth(config, depth: int):
    """A copy of ``config`` with ``depth`` layers (everything else unchanged)."""
    positive_int(depth, "depth")
    kind = budget.Sizes.of(config).kind
    out = copy.deepcopy(config)
    if kind == "distilbert":
        out.n_layers = depth
    else:
        out.num_hidden_layers = depth
    return out


def unshared(config):
    """An ALBERT config whose ``L`` layers each have their own parameters (``num_hidden_groups = L``)."""
    if budget.Sizes.of(config).kind != "albert":
        raise ValueError(f"unshared() takes an ALBERT config, got model type {config.model_type!r}")
    out = copy.deepcopy(config)
    out.num_hidden_groups = config.num_hidden_layers
    out.inner_group_num = 1
    return out


def count(config, mlm_head: bool = False) -> int:
    """Distinct parameters of ``config``, by :func:`bertfamily.budget.count`.

    ALBERT configs with ``num_hidden_groups = G > 1`` (one shared layer per group) are counted as the
    one-group model plus ``G - 1`` more layers.
    """
    if getattr(config, "model_type", None) != "albert" or config.num_hidden_groups == 1:
        return budget.count(config, mlm_head)
    if config.inner_group_num != 1 or config.num_hidden_layers % config.num_hidden_groups:
        raise ValueError("count() knows ALBERT with one layer per group and L divisible by the groups; "
                         f"got inner_group_num={config.inner_group_num}, "
                         f"num_hidden_groups={config.num_hidden_groups}, L={config.num_hidden_layers}")
    one = copy.deepcopy(config)
    one.num_hidden_groups = 1
    per_layer = sum(budget.layer_parameters(config.hidden_size, config.intermediate_size).values())
    return budget.count(one, mlm_head) + (config.num_hidden_groups - 1) * per_layer


# --------------------------------------------------------------------------- compute

def encoder_macs(config, seq_len: int, batch: int = 1) -> OrderedDict:
    """Multiply-adds of one forward pass of the encoder (and pooler), by component.

    Per layer and sequence of ``s`` tokens: query, key, value and output projections ``4 s H²``;
    attention scores ``Q Kᵀ`` and the weighted sum of values ``2 s² H``; feed-forward ``2 s H I``.
    ALBERT adds the embedding projection ``s E H``; BERT-style models add the pooler ``H²`` (one
    token). Lookups, biases, LayerNorms, softmax and activations are not multiply-adds and are
    left out (they are a few percent of the time, not of these counts). Note that ``L`` enters
    whether or not the layers share parameters.
    """
    s, b = positive_int(seq_len, "seq_len"), positive_int(batch, "batch")
    dims = budget.Sizes.of(config)
    E, H, I, L = dims.embedding, dims.hidden, dims.intermediate, dims.layers
    parts = OrderedDict()
    if E != H:
        parts["embedding projection"] = b * s * E * H
    parts["attention projections"] = b * L * 4 * s * H * H
    parts["attention scores and sums"] = b * L * 2 * s * s * H
    parts["feed-forward"] = b * L * 2 * s * H * I
    if dims.pooler:
        parts["pooler"] = b * H * H
    return parts


@contextlib.contextmanager
def _eager_attention(model):
    """Use plain matmul attention for a while: the flop counter does not see CPU SDPA kernels."""
    configs = {id(m.config): m.config for m in model.modules() if hasattr(m, "config")}
    saved = {k: c._attn_implementation for k, c in configs.items()}
    try:
        for c in configs.values():
            c._attn_implementation = "eager"
        yield
    finally:
        for k, c in configs.items():
            c._attn_implementation = saved[k]


def measured_macs(model, seq_len: int, batch: int = 1, vocab_size: int | None = None) -> dict:
    """Multiply-adds of ``model`` on a ``batch x seq_len`` input, measured by ``FlopCounterMode``.

    The counter reports 2 flops per multiply-add of every matrix product it sees (``addmm``, ``bmm``,
    ...); the result is halved. Attention runs in eager mode while counting, because the counter has
    no formula for the fused CPU attention kernel. Returns ``{"total": n, "by_op": {...}}``.
    """
    from torch.utils.flop_counter import FlopCounterMode

    s, b = positive_int(seq_len, "seq_len"), positive_int(batch, "batch")
    V = vocab_size or model.config.vocab_size
    ids = torch.randint(0, V, (b, s), generator=torch.Generator().manual_seed(0))
    with _eager_attention(model), torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids)
    by_op = {str(k): v // 2 for k, v in counter.get_flop_counts()["Global"].items()}
    return {"total": counter.get_total_flops() // 2, "by_op": by_op}


@contextlib.contextmanager
def at_depth(model, depth: int):
    """Run a BERT-like or ALBERT model with only its first ``depth`` layer applications, for a while.

    BERT's encoder keeps the first ``depth`` of its layers (the others are set aside, not freed);
    ALBERT applies its shared layer ``depth`` times. Everything is restored on exit.
    """
    positive_int(depth, "depth")
    dims = budget.Sizes.of(model.config)
    kind, L = dims.kind, dims.layers
    if depth > L:
        raise ValueError(f"depth must be at most the model's {L} layers, got {depth}")
    if kind == "albert":
        if model.config.num_hidden_groups != 1:
            raise ValueError("at_depth() needs a fully shared ALBERT (num_hidden_groups = 1)")
        model.config.num_hidden_layers = depth
        try:
            yield model
        finally:
            model.config.num_hidden_layers = L
    elif kind in ("bert", "roberta", "xlm-roberta"):
        encoder = model.encoder if hasattr(model, "encoder") else model.base_model.encoder
        layers = encoder.layer
        encoder.layer = layers[:depth]
        model.config.num_hidden_layers = depth
        try:
            yield model
        finally:
            encoder.layer = layers
            model.config.num_hidden_layers = L
    else:
        raise ValueError(f"at_depth() knows bert, roberta, xlm-roberta and albert models, got {kind!r}")


# --------------------------------------------------------------------------- tiny models

def tiny_albert(vocab_size: int, shared: bool = True, embedding_size: int = 32, hidden_size: int = 64,
                layers: int = 4, heads: int = 4, intermediate_size: int = 128, max_len: int = 64,
                seed: int = 0):
    """A small ``AlbertForMaskedLM``: one layer applied ``layers`` times, or ``layers`` own layers.

    The two variants differ only in ``num_hidden_groups`` (1 or ``layers``): same width, depth,
    factorised embeddings and compute per token. Dropout is off so that training is deterministic.
    """
    from transformers import AlbertConfig, AlbertForMaskedLM

    for name, value in (("vocab_size", vocab_size), ("embedding_size", embedding_size),
                        ("hidden_size", hidden_size), ("layers", layers), ("heads", heads),
                        ("intermediate_size", intermediate_size), ("max_len", max_len)):
        positive_int(value, name)
    if hidden_size % heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by heads ({heads})")
    config = AlbertConfig(vocab_size=vocab_size, embedding_size=embedding_size, hidden_size=hidden_size,
                          num_hidden_layers=layers, num_attention_heads=heads,
                          intermediate_size=intermediate_size, max_position_embeddings=max_len,
                          num_hidden_groups=1 if shared else layers, inner_group_num=1,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                          classifier_dropout_prob=0.0, pad_token_id=0)
    torch.manual_seed(seed)
    return AlbertForMaskedLM(config)
