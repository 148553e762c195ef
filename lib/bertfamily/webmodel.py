"""The course model in the reader's browser: its weights and tokenizer written for ``web/fillmask.js``.

Lesson 1's page lets a reader type a sentence with ``[MASK]`` and see the course model's five guesses,
computed in the browser with no kernel. The model is small (4 layers of width 256), so a plain-JavaScript
forward pass of ``BertForMaskedLM`` (``web/fillmask.js``, one small file) runs it in a fraction of a second,
and the page needs no runtime library (ONNX Runtime Web's WebAssembly is megabytes): the download is the
weights (float16, as the checkpoint stores them) and the vocabulary. Float16 rather than lesson 3's int8:
int8 weights (one scale per row, every matrix) would halve the download but move the five guesses (measured
on the first 40 held-out blocks: the same five in the same order on 74% of 739 blanks, the same first guess
on 98%), and the page must show the Python model's five.

* :func:`export` writes ``course-model.json`` (the configuration, where each tensor lies, the WordPiece
  vocabulary and the compact vocabulary) and ``course-model.bin`` (every tensor in float16, tied ones once).
* :func:`read` reads them back into a ``BertForMaskedLM`` state dict: the export loses nothing.
* :func:`site_export` exports the stored course model into a folder, reusing an export of the same
  checkpoint (the key is the checkpoint's SHA-256 and :data:`FORMAT`).
* :func:`setup` is a Sphinx extension (``_config.yml``): every build writes the export into
  ``_static/course-model/`` and adds ``fillmask.js`` and ``fillmask.css`` (kept in the package, not in
  ``_static/``, which Jupyter Book adds to every page) to the pages that have a cell tagged ``browser-fill``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch

__all__ = [
    "export",
    "read",
    "site_export",
    "download_bytes",
    "page_settings",
    "write_static",
    "MANIFEST",
    "WEIGHTS",
    "FORMAT",
    "TAG",
    "setup",
]

MANIFEST, WEIGHTS = "course-model.json", "course-model.bin"
#: Bumped whenever the files' layout changes (part of the cache key of :func:`site_export`).
FORMAT = 1
#: The cell tag that marks where the page's form goes.
TAG = "browser-fill"
SITE_FOLDER = "course-model"  # under _static/
#: The page's script and style (package data), copied into the site's _static/.
WEB = Path(__file__).resolve().parent / "web"
ASSETS = ("fillmask.js", "fillmask.css")


def _tokenizer_spec(tokenizer) -> dict:
    """What fillmask.js needs to cut text exactly as ``tokenizer`` does (a BERT WordPiece tokenizer)."""
    backend = tokenizer.backend_tokenizer
    spec = json.loads(backend.to_str())
    normalizer, pre, model = spec["normalizer"], spec["pre_tokenizer"], spec["model"]
    if (
        not normalizer
        or normalizer.get("type") != "BertNormalizer"
        or model.get("type") != "WordPiece"
        or not pre
        or pre.get("type") != "BertPreTokenizer"
    ):
        raise ValueError(
            "the browser runs BERT's WordPiece tokenizer only (BertNormalizer, BertPreTokenizer, "
            f"WordPiece); this tokenizer has {normalizer and normalizer.get('type')}, "
            f"{pre and pre.get('type')}, {model.get('type')}"
        )
    lowercase = normalizer["lowercase"]
    strip = normalizer["strip_accents"]
    cleans = normalizer["clean_text"] and normalizer["handle_chinese_chars"]
    if not cleans or (strip is not None and strip != lowercase):
        raise ValueError(
            f"the browser's normalizer cleans text, spaces Chinese characters and strips accents "
            f"when it lower-cases; this one is {normalizer}"
        )
    vocab = tokenizer.get_vocab()
    pieces = [None] * len(vocab)
    for piece, i in vocab.items():
        pieces[i] = piece
    if any(p is None for p in pieces):
        raise ValueError("the vocabulary's ids must run from 0 without gaps")
    return {
        "vocab": pieces,
        "lowercase": lowercase,
        "unk_token": model["unk_token"],
        "continuing_subword_prefix": model["continuing_subword_prefix"],
        "max_input_chars_per_word": model["max_input_chars_per_word"],
        "special_tokens": list(tokenizer.all_special_tokens),
        "cls_token": tokenizer.cls_token,
        "sep_token": tokenizer.sep_token,
        "mask_token": tokenizer.mask_token,
    }


def _config(model) -> dict:
    c = model.config
    if c.hidden_act != "gelu" or getattr(c, "position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"the browser runs BERT with exact GELU and absolute positions; this model has "
            f"{c.hidden_act!r} and {getattr(c, 'position_embedding_type', None)!r}"
        )
    return {
        "hidden": c.hidden_size,
        "layers": c.num_hidden_layers,
        "heads": c.num_attention_heads,
        "intermediate": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "max_positions": c.max_position_embeddings,
        "layer_norm_eps": c.layer_norm_eps,
    }


def export(model, words, tokenizer, folder) -> dict:
    """Write ``model`` (a ``BertForMaskedLM`` over ``words``' compact ids) and ``tokenizer`` into ``folder``
    for the browser; returns the manifest with ``bytes`` (the two files' total size) added.

    The weights go out in float16: the course's checkpoints store float16, so nothing is rounded."""
    import transformers

    if not isinstance(model, transformers.BertForMaskedLM):
        raise TypeError(f"export takes a BertForMaskedLM, got {type(model).__name__}")
    if model.cls.predictions.decoder.weight.data_ptr() != model.bert.embeddings.word_embeddings.weight.data_ptr():
        raise ValueError("the browser's output layer is the input embedding (tied weights); this model's is not")
    if words.size != model.config.vocab_size:
        raise ValueError(f"the compact vocabulary has {words.size} ids, the model {model.config.vocab_size}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors, seen, offset, chunks = [], set(), 0, []
    for name, value in model.state_dict().items():
        if not value.is_floating_point() or value.data_ptr() in seen:  # position ids; tied copies
            continue
        seen.add(value.data_ptr())
        data = value.detach().to(torch.float16).contiguous().numpy().astype("<f2").tobytes()
        tensors.append({"name": name, "shape": list(value.shape), "count": value.numel(), "offset": offset})
        chunks.append(data)
        offset += len(data)
    manifest = {
        "format": FORMAT,
        "config": _config(model),
        "dtype": "float16",
        "tensors": tensors,
        "tokenizer": _tokenizer_spec(tokenizer),
        "compact_ids": words.original_ids.tolist(),
        "compact_unk": words.unk,
    }
    (folder / WEIGHTS).write_bytes(b"".join(chunks))
    (folder / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return {**manifest, "bytes": download_bytes(folder)}


def download_bytes(folder) -> int:
    """The bytes a reader downloads on first asking: the manifest and the weights."""
    return sum((Path(folder) / name).stat().st_size for name in (MANIFEST, WEIGHTS))


def read(folder) -> tuple[dict, dict]:
    """``(manifest, state dict)``: the exported tensors back as float32, tied copies filled in."""
    import numpy as np

    folder = Path(folder)
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    raw = (folder / WEIGHTS).read_bytes()
    state = {}
    for t in manifest["tensors"]:
        values = np.frombuffer(raw, dtype="<f2", count=t["count"], offset=t["offset"]).astype(np.float32)
        state[t["name"]] = torch.from_numpy(values.reshape(t["shape"]))
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
    return manifest, state


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def site_export(folder, checkpoint: str = "course-model") -> dict:
    """The stored course model exported into ``folder`` (reused when it holds an export of the same
    checkpoint and format): ``{"bytes", "parameters", "key"}``. Loading the course data takes seconds."""
    from bertfamily.checkpoints.common import FOLDER, load_into
    from bertfamily.checkpoints.course import course_data, course_model
    from bertfamily.models import count_parameters

    folder = Path(folder)
    key = f"{_sha256(FOLDER / f'{checkpoint}.pt')}-{FORMAT}"
    stamp = folder / "export.json"
    if stamp.is_file() and all((folder / n).is_file() for n in (MANIFEST, WEIGHTS)):
        done = json.loads(stamp.read_text(encoding="utf-8"))
        if done.get("key") == key:
            return done
    data = course_data()
    model = load_into(course_model(data), checkpoint)
    # written aside, then moved in file by file, the stamp last: a build reading the folder meanwhile
    # (make test's builds share it) sees a whole export or none
    aside = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    manifest = export(model, data.words, data.tokenizer, aside)
    done = {"key": key, "bytes": manifest["bytes"], "parameters": count_parameters(model)}
    (aside / "export.json").write_text(json.dumps(done), encoding="utf-8")
    folder.mkdir(parents=True, exist_ok=True)
    for name in (MANIFEST, WEIGHTS, "export.json"):
        os.replace(aside / name, folder / name)
    aside.rmdir()
    return done


# --------------------------------------------------------------------------- the Sphinx extension


def _builder_inited(app) -> None:
    if app.builder.format != "html":
        return
    # _build/course-model of the book's source folder, shared by every build of it (make book, the tests'
    # builds into temporary folders): exported once per checkpoint (seconds: it loads the course data)
    cache = Path(app.srcdir) / "_build" / SITE_FOLDER
    app.bertfamily_model = {**site_export(cache), "cache": str(cache)}


def page_settings(done: dict) -> dict:
    """What the page's script is told before it downloads anything (:func:`site_export`'s result)."""
    return {
        "folder": f"{SITE_FOLDER}/",
        "manifest": MANIFEST,
        "weights": WEIGHTS,
        "bytes": done["bytes"],
        "parameters": f"{done['parameters']:,}",
    }


def write_static(static, model_folder) -> Path:
    """Copy the page's script and style into the site's ``static`` folder, and the exported model from
    ``model_folder`` into ``static/course-model/``; returns that folder."""
    target = Path(static) / SITE_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    for name in (MANIFEST, WEIGHTS):
        shutil.copyfile(Path(model_folder) / name, target / name)
    for name in ASSETS:
        shutil.copyfile(WEB / name, Path(static) / name)
    return target


def _page_context(app, pagename, templatename, context, doctree) -> None:
    from docutils import nodes

    done = getattr(app, "bertfamily_model", None)
    if done is None or doctree is None:
        return
    if not any(f"tag_{TAG}" in node.get("classes", []) for node in doctree.findall(nodes.Element)):
        return
    app.add_js_file(None, body=f"window.BERTFAMILY_MODEL = {json.dumps(page_settings(done))};")
    app.add_js_file("fillmask.js")
    app.add_css_file("fillmask.css")


def _build_finished(app, exception) -> None:
    done = getattr(app, "bertfamily_model", None)
    if exception is None and done is not None:
        write_static(Path(app.outdir) / "_static", done["cache"])


def setup(app) -> dict:
    """Sphinx extension: the course model and its script on the pages that ask for them."""
    app.connect("builder-inited", _builder_inited)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv=None) -> int:
    """``python -m bertfamily.webmodel [FOLDER]``: export the course model for the browser (what each build
    of the website does), by default into ``_build/course-model``."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("folder", nargs="?", default="_build/course-model", help="where to write the two files")
    args = parser.parse_args(argv)
    done = site_export(args.folder)
    print(
        f"{args.folder}: {MANIFEST} and {WEIGHTS}, {done['bytes']:,} bytes, {done['parameters']:,} parameters "
        f"(checkpoint and format {done['key'][:12]}…)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
