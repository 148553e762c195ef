"""The parameter budget of a BERT-family configuration, by component, computed with pen and paper.

Every count here is a formula in the configuration's sizes, and the tests check each one against
``sum(p.numel() for p in model.parameters())`` on the real transformers model:

* one encoder layer: attention ``4(H² + H)`` (query, key, value, output), feed-forward
  ``(HI + I) + (IH + H)``, two LayerNorms ``4H``;
* BERT embeddings: ``(V + P + T)H`` plus one LayerNorm ``2H``; the pooler ``H² + H``;
* DistilBERT: BERT with no segment table (T = 0) and no pooler;
* ALBERT: embeddings of width E, a projection ``EH + H``, then *one* layer shared by all L.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MIB = 2 ** 20


@dataclass(frozen=True)
class Sizes:
    """The sizes of a BERT-family configuration, by name (the formulas' letters in brackets).

    The course's one reader of a config: :func:`sizes` here, and :mod:`bertfamily.sharing` and
    :mod:`bertfamily.quantization` read configs through it. Iterating gives the old positional
    9-tuple ``(V, P, T, H, I, L, E, shared, pooler)``.
    """
    kind: str           # model_type: bert, roberta, xlm-roberta, distilbert or albert
    vocab: int          # V
    positions: int      # P
    segments: int       # T (0: DistilBERT has no segment table)
    hidden: int         # H
    intermediate: int   # I
    layers: int         # L
    embedding: int      # E (= H, except ALBERT's factorised embeddings)
    heads: int
    shared: bool        # ALBERT with one layer applied L times
    pooler: bool

    def __iter__(self):
        return iter((self.vocab, self.positions, self.segments, self.hidden, self.intermediate,
                     self.layers, self.embedding, self.shared, self.pooler))

    @classmethod
    def of(cls, config) -> Sizes:
        """Read a BERT, RoBERTa, XLM-R, DistilBERT or ALBERT config (any number of ALBERT groups)."""
        kind = getattr(config, "model_type", None)
        if kind == "distilbert":
            H, I, L, T, heads, pooler = config.dim, config.hidden_dim, config.n_layers, 0, config.n_heads, False
        elif kind in ("bert", "roberta", "xlm-roberta", "albert"):
            H, I, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers
            T, heads, pooler = config.type_vocab_size, config.num_attention_heads, True
        else:
            raise ValueError(f"budget knows model types bert, roberta, xlm-roberta, distilbert and albert; "
                             f"got {kind!r}")
        E = config.embedding_size if kind == "albert" else H
        shared = kind == "albert" and config.num_hidden_groups == 1
        return cls(kind, config.vocab_size, config.max_position_embeddings, T, H, I, L, E, heads, shared,
                   pooler)


def sizes(config) -> Sizes:
    """The :class:`Sizes` of a config whose layers :func:`breakdown` can count: BERT, RoBERTa, XLM-R,
    DistilBERT, or ALBERT with its default of one shared layer."""
    found = Sizes.of(config)
    if found.kind == "albert" and (config.num_hidden_groups != 1 or config.inner_group_num != 1):
        raise ValueError("budget assumes ALBERT's default: one shared layer "
                         "(num_hidden_groups = inner_group_num = 1)")
    return found


def layer_parameters(H: int, I: int) -> OrderedDict:
    """Parameters of one Transformer encoder layer, by part."""
    return OrderedDict(attention=4 * (H * H + H),
                       feed_forward=(H * I + I) + (I * H + H),
                       layer_norms=4 * H)


def breakdown(config, mlm_head: bool = False) -> OrderedDict:
    """Distinct parameters by component, in the order a forward pass meets them.

    With ``mlm_head`` the count is that of the masked-LM model (``BertForMaskedLM`` and friends):
    no pooler, and the head's transform (dense + LayerNorm) and output bias instead; the decoder
    matrix is tied to the word embeddings, so it adds no distinct parameters.
    """
    s = sizes(config)
    V, P, T, H, I, L, E = s.vocab, s.positions, s.segments, s.hidden, s.intermediate, s.layers, s.embedding
    parts = OrderedDict()
    parts["word embeddings"] = V * E
    parts["position embeddings"] = P * E
    if T:
        parts["segment embeddings"] = T * E
    parts["embedding LayerNorm"] = 2 * E
    if E != H:
        parts["embedding projection"] = E * H + H
    layer = layer_parameters(H, I)
    copies = 1 if s.shared else L
    parts["attention"] = layer["attention"] * copies
    parts["feed-forward"] = layer["feed_forward"] * copies
    parts["layer LayerNorms"] = layer["layer_norms"] * copies
    if s.pooler and not mlm_head:
        parts["pooler"] = H * H + H
    if mlm_head:
        # transform (E x H dense for ALBERT, H x H otherwise) + LayerNorm, then the output bias
        parts["MLM head"] = (H * E + E) + 2 * E + V
    return parts


def count(config, mlm_head: bool = False) -> int:
    """Total distinct parameters of ``config`` (see :func:`breakdown`)."""
    return sum(breakdown(config, mlm_head).values())


def tied_decoder(config) -> int:
    """Parameters the MLM model's ``state_dict()`` lists twice because they are tied.

    The decoder matrix *is* the word-embedding matrix (V x E); in BERT, RoBERTa and ALBERT the
    decoder's bias is also the head's bias (V). ``parameters()`` yields each tensor once, so summing
    ``state_dict()`` over-counts by exactly this much: the double-counting trap.
    """
    s = sizes(config)
    return s.vocab * s.embedding + (0 if s.kind == "distilbert" else s.vocab)


def to_bytes(n_parameters: int, bits: int = 32) -> int:
    """Bytes needed to store ``n_parameters`` at ``bits`` per parameter (whole bytes, rounded up)."""
    if bits not in (1, 2, 4, 8, 16, 32, 64):
        raise ValueError(f"bits must be one of 1, 2, 4, 8, 16, 32, 64; got {bits}")
    if n_parameters < 0:
        raise ValueError(f"n_parameters must be non-negative, got {n_parameters}")
    return -(-n_parameters * bits // 8)


def to_mib(n_parameters: int, bits: int = 32) -> float:
    """Mebibytes (2**20 bytes) needed to store ``n_parameters`` at ``bits`` per parameter."""
    return to_bytes(n_parameters, bits) / MIB
