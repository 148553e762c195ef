"""ALBERT's factorisation and sharing arithmetic, checked against real transformers models (tiny)."""

import pytest
import torch
from transformers import AlbertConfig, AlbertModel, BertModel

from bertfamily import budget, models, sharing, timing

#: conftest's tiny models with three layers: enough to tell one layer applied thrice from three layers.
LAYERS = 3


@pytest.fixture
def bert_config(tiny_config):  # a fresh one per test: at_depth and measured_macs change a model's config
    return tiny_config(num_hidden_layers=LAYERS)


@pytest.fixture
def albert_config(tiny_config):
    """``albert_config(**overrides)``: a tiny ALBERT (one shared layer unless overridden)."""
    return lambda **kw: tiny_config("albert", **{"num_hidden_layers": LAYERS, **kw})


def ids(model, n=11):
    return {"input_ids": torch.randint(0, model.config.vocab_size, (2, n), generator=torch.Generator().manual_seed(0))}


# --------------------------------------------------------------------------- factorisation


def test_embedding_parameters_factorised_and_not():
    assert sharing.embedding_parameters(30000, 768) == 30000 * 768
    assert sharing.embedding_parameters(30000, 768, 768) == 30000 * 768
    assert sharing.embedding_parameters(30000, 768, 128) == 30000 * 128 + 128 * 768
    assert sharing.embedding_parameters(30000, 768, 128, bias=True) == 30000 * 128 + 128 * 768 + 768


def test_break_even_is_where_the_two_counts_meet():
    V, H = 250002, 768
    e = sharing.break_even_embedding_size(V, H)
    assert V * e + e * H == pytest.approx(V * H)
    below, above = int(e) - 1, int(e) + 2
    assert sharing.embedding_parameters(V, H, below) < V * H < sharing.embedding_parameters(V, H, above)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, None])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="must be a positive integer"):
        sharing.embedding_parameters(bad, 768)
    with pytest.raises(ValueError, match="must be a positive integer"):
        sharing.break_even_embedding_size(30000, bad)


# --------------------------------------------------------------------------- counting what is stored


def test_distinct_parameters_match_parameters_and_budget(bert_config, albert_config):
    for model in (AlbertModel(albert_config()), BertModel(bert_config)):
        found = sharing.distinct_parameters(model)
        assert found["elements"] == models.count_parameters(model) == budget.count(model.config)
        assert found["names"] == found["tensors"]


def test_a_module_reached_twice_is_stored_once():
    layer = torch.nn.Linear(5, 5)
    twice = torch.nn.ModuleList([layer, layer, torch.nn.Linear(5, 2)])
    found = sharing.distinct_parameters(twice)
    assert found == {"names": 6, "tensors": 4, "elements": 30 + 12}


def test_distinct_parameters_refuses_an_empty_model():
    with pytest.raises(ValueError, match="no parameters"):
        sharing.distinct_parameters(torch.nn.ReLU())


def test_albert_applies_one_layer_l_times_and_bert_l_layers(bert_config, albert_config):
    albert = AlbertModel(albert_config()).eval()
    calls = sharing.layer_applications(albert, ids(albert))
    assert len(calls) == 3 and len(set(calls)) == 1
    bert = BertModel(bert_config).eval()
    calls = sharing.layer_applications(bert, ids(bert))
    assert len(calls) == 3 and len(set(calls)) == 3
    unshared = AlbertModel(sharing.unshared(albert_config())).eval()
    assert len(set(sharing.layer_applications(unshared, ids(unshared)))) == 3


def test_layer_applications_needs_a_layer():
    with pytest.raises(ValueError, match="no encoder layer"):
        sharing.layer_applications(torch.nn.Linear(3, 3), {"input": torch.ones(1, 3)})


def test_count_with_groups_matches_transformers(albert_config):
    for config in (
        albert_config(),
        sharing.unshared(albert_config()),
        albert_config(num_hidden_layers=4, num_hidden_groups=2),
    ):
        assert sharing.count(config) == models.count_parameters(AlbertModel(config))
    with pytest.raises(ValueError, match="divisible"):
        sharing.count(albert_config(num_hidden_layers=3, num_hidden_groups=2))


def test_published_albert_counts():
    assert sharing.count(models.published_config("albert-base-v2")) == 11_683_584
    assert sharing.count(models.published_config("albert-large-v2")) == 17_683_968
    xxlarge = AlbertConfig(
        vocab_size=30000,
        embedding_size=128,
        hidden_size=4096,
        num_hidden_layers=12,
        num_attention_heads=64,
        intermediate_size=16384,
    )
    assert sharing.count(xxlarge) == 222_595_584  # the paper prints 235M


def test_unshared_refuses_non_albert(bert_config):
    with pytest.raises(ValueError, match="ALBERT config"):
        sharing.unshared(bert_config)


# --------------------------------------------------------------------------- compute


@pytest.mark.parametrize("kind", ["bert", "albert", "unshared albert", "distilbert"])
@pytest.mark.parametrize("seq_len", [1, 13])
def test_analytic_macs_match_the_flop_counter(kind, seq_len, bert_config, albert_config, tiny_config):
    config = {
        "bert": bert_config,
        "albert": albert_config(),
        "unshared albert": sharing.unshared(albert_config()),
        "distilbert": tiny_config("distilbert"),
    }[kind]
    model = models.transformers.AutoModel.from_config(config).eval()
    measured = sharing.measured_macs(model, seq_len, batch=2)
    assert measured["total"] == sum(sharing.encoder_macs(model.config, seq_len, batch=2).values())


def test_sharing_does_not_change_compute_and_depth_does(albert_config):
    shared, unshared = albert_config(), sharing.unshared(albert_config())
    assert sharing.encoder_macs(shared, 20) == sharing.encoder_macs(unshared, 20)
    one = sum(sharing.encoder_macs(sharing.with_depth(shared, 1), 20).values())
    six = sum(sharing.encoder_macs(sharing.with_depth(shared, 6), 20).values())
    per_layer = (
        sum(
            v
            for k, v in sharing.encoder_macs(shared, 20).items()
            if k in ("attention projections", "attention scores and sums", "feed-forward")
        )
        // 3
    )
    assert six - one == 5 * per_layer
    assert sharing.count(sharing.with_depth(shared, 6)) == sharing.count(shared)


def test_measured_macs_restores_the_attention_implementation(tiny_config):
    model = BertModel(tiny_config(num_hidden_layers=LAYERS, attn_implementation="sdpa")).eval()
    sharing.measured_macs(model, 5)
    assert model.config._attn_implementation == "sdpa"


def test_at_depth_runs_fewer_layers_and_restores(bert_config, albert_config):
    albert = AlbertModel(albert_config()).eval()
    with sharing.at_depth(albert, 2):
        assert len(sharing.layer_applications(albert, ids(albert))) == 2
        assert models.count_parameters(albert) == budget.count(albert.config)
    assert len(sharing.layer_applications(albert, ids(albert))) == 3
    bert = BertModel(bert_config).eval()
    full = models.count_parameters(bert)
    with sharing.at_depth(bert, 1):
        assert models.count_parameters(bert) == budget.count(sharing.with_depth(bert.config, 1)) < full
        assert len(sharing.layer_applications(bert, ids(bert))) == 1
    assert models.count_parameters(bert) == full and bert.config.num_hidden_layers == 3
    with pytest.raises(ValueError, match="at most"):
        with sharing.at_depth(bert, 4):
            pass


def test_forward_latency_times_each_run(bert_config):
    model = BertModel(bert_config).eval()
    times = timing.forward_latency(model, 8, runs=3, warmup=0)
    assert len(times) == 3 and all(t > 0 for t in times)
    assert timing.median([3.0, 1.0, 2.0]) == 2.0
    with pytest.raises(ValueError, match="runs"):
        timing.forward_latency(model, 8, runs=0)
    with pytest.raises(ValueError, match="warmup"):
        timing.forward_latency(model, 8, warmup=-1)
    threads = torch.get_num_threads()
    assert len(timing.forward_latency(model, 8, runs=1, threads=1)) == 1
    assert torch.get_num_threads() == threads
    with pytest.raises(ValueError, match="threads"):
        timing.forward_latency(model, 8, threads=0)


def test_time_call_times_small_operations():
    calls = []
    times = timing.time_call(lambda x: calls.append(x), 1, runs=3, number=4)
    assert len(times) == 3 and all(t >= 0 for t in times) and len(calls) == 1 + 3 * 4
    with pytest.raises(ValueError, match="callable"):
        timing.time_call(3)
    with pytest.raises(ValueError, match="number"):
        timing.time_call(abs, 1, number=0)


def test_interleaved_latency_gives_every_model_its_runs(bert_config, albert_config):
    a, b = BertModel(bert_config), AlbertModel(albert_config())
    times = timing.interleaved_latency({"bert": a, "albert": b}, 8, runs=2, warmup=0)
    assert set(times) == {"bert", "albert"} and all(len(t) == 2 for t in times.values())
    with pytest.raises(ValueError, match="at least one model"):
        timing.interleaved_latency({}, 8)


def test_unknown_model_type_is_refused():
    with pytest.raises(ValueError, match="model types"):
        sharing.encoder_macs(torch.nn.Module(), 8)


# --------------------------------------------------------------------------- tiny models


def test_shared_and_unshared_tiny_albert_differ_only_in_stored_layers():
    shared = sharing.tiny_albert(
        50, shared=True, layers=3, hidden_size=16, heads=2, intermediate_size=24, embedding_size=8, max_len=16
    )
    own = sharing.tiny_albert(
        50, shared=False, layers=3, hidden_size=16, heads=2, intermediate_size=24, embedding_size=8, max_len=16
    )
    layer = sum(budget.layer_parameters(16, 24).values())
    assert models.count_parameters(own) - models.count_parameters(shared) == 2 * layer
    assert models.count_parameters(shared) == sharing.count(shared.config, mlm_head=True)
    assert models.count_parameters(own) == sharing.count(own.config, mlm_head=True)
    with pytest.raises(ValueError, match="divisible"):
        sharing.tiny_albert(50, hidden_size=10, heads=4)
