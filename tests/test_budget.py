"""bertfamily.budget against transformers, for every configuration the course quotes (FACTS.md §1).

Models are built on the ``meta`` device: the real architecture and shapes, no memory, no init time.
The expected totals are the published-config counts; the test also checks each against
``sum(p.numel() for p in model.parameters())`` of the transformers model itself.
"""

import pytest
import torch
from transformers import AlbertConfig, AutoModel, AutoModelForMaskedLM, BertConfig

from bertfamily import budget, models


def build(config, mlm_head=False):
    with torch.device("meta"):
        return (AutoModelForMaskedLM if mlm_head else AutoModel).from_config(config)


def parameters(model):
    return sum(p.numel() for p in model.parameters())


def state_dict_total(model):
    return sum(t.numel() for t in model.state_dict().values() if t.is_floating_point())


# name -> (configuration, expected count of the base model); FACTS.md §1
COURSE = {
    "bert-base-uncased": (models.published_config("bert-base-uncased"), 109_482_240),
    "distilbert-base-uncased": (models.published_config("distilbert-base-uncased"), 66_362_880),
    "bert-large-uncased": (models.published_config("bert-large-uncased"), 335_141_888),
    "albert-base-v2": (models.published_config("albert-base-v2"), 11_683_584),
    "albert-large-v2": (models.published_config("albert-large-v2"), 17_683_968),
    "albert-xlarge": (
        AlbertConfig(
            vocab_size=30000,
            embedding_size=128,
            hidden_size=2048,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=8192,
        ),
        58_724_864,
    ),
    "albert-xxlarge": (
        AlbertConfig(
            vocab_size=30000,
            embedding_size=128,
            hidden_size=4096,
            num_hidden_layers=12,
            num_attention_heads=64,
            intermediate_size=16384,
        ),
        222_595_584,
    ),
    "bert-base-multilingual-cased": (models.published_config("bert-base-multilingual-cased"), 177_853_440),
    "distilbert-base-multilingual-cased": (models.published_config("distilbert-base-multilingual-cased"), 134_734_080),
    "xlm-roberta-base": (models.published_config("xlm-roberta-base"), 278_043_648),
    "roberta-base": (models.published_config("roberta-base"), 124_645_632),
}


def test_every_published_config_is_covered():
    covered = {name for name in COURSE}
    assert set(models.KNOWN_MODELS) <= covered


@pytest.mark.parametrize("name", list(COURSE))
def test_count_matches_transformers(name):
    config, expected = COURSE[name]
    model = build(config)
    assert parameters(model) == expected  # the fact itself, re-derived from transformers
    assert budget.count(config) == expected
    assert sum(budget.breakdown(config).values()) == expected


@pytest.mark.parametrize("name", list(COURSE))
def test_mlm_count_and_the_state_dict_trap(name):
    """With the MLM head: parameters() counts the tied decoder once, state_dict() twice."""
    config, _ = COURSE[name]
    model = build(config, mlm_head=True)
    assert budget.count(config, mlm_head=True) == parameters(model)
    assert state_dict_total(model) - parameters(model) == budget.tied_decoder(config)
    assert budget.tied_decoder(config) > 0


def test_bert_mlm_figures_of_the_lesson():
    config = models.published_config("bert-base-uncased")
    model = build(config, mlm_head=True)
    assert parameters(model) == budget.count(config, mlm_head=True) == 109_514_298
    assert state_dict_total(model) == 132_985_716
    assert budget.count(config, mlm_head=True) + budget.tied_decoder(config) == 132_985_716


@pytest.mark.parametrize("name", ["bert-base-uncased", "distilbert-base-uncased", "albert-base-v2"])
def test_breakdown_by_component_matches_the_modules(name):
    config, _ = COURSE[name]
    model = build(config)
    parts = budget.breakdown(config)
    embeddings = sum(p.numel() for p in model.embeddings.parameters())
    tables = [k for k in parts if "embeddings" in k or k == "embedding LayerNorm"]
    assert sum(parts[k] for k in tables) == embeddings
    encoder = sum(p.numel() for p in (model.encoder if hasattr(model, "encoder") else model.transformer).parameters())
    body = parts["attention"] + parts["feed-forward"] + parts["layer LayerNorms"]
    assert body + parts.get("embedding projection", 0) == encoder
    pooler = getattr(model, "pooler", None)
    assert parts.get("pooler", 0) == (parameters(pooler) if pooler is not None else 0)


def test_distilbert_is_bert_without_segments_and_pooler():
    distil = budget.breakdown(models.published_config("distilbert-base-uncased"))
    bert = budget.breakdown(models.published_config("bert-base-uncased"))
    assert "segment embeddings" not in distil and "pooler" not in distil
    assert distil["attention"] * 2 == bert["attention"]
    assert 1 - budget.count(models.published_config("distilbert-base-uncased")) / budget.count(
        models.published_config("bert-base-uncased")
    ) == pytest.approx(0.394, abs=5e-4)


def test_tiny_config_on_a_real_device():
    """One real (not meta) model, small, so the count is also checked on materialised weights."""
    config = BertConfig(
        vocab_size=300,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=48,
        max_position_embeddings=40,
        type_vocab_size=3,
    )
    model = AutoModel.from_config(config)
    assert budget.count(config) == parameters(model)
    assert budget.layer_parameters(32, 48)["attention"] == 4 * (32 * 32 + 32)


def test_bytes_and_mib():
    assert budget.to_bytes(66_362_880, 32) == 265_451_520
    assert budget.to_mib(66_362_880, 32) == pytest.approx(253.2, abs=0.05)
    assert budget.to_mib(109_482_240, 32) == pytest.approx(417.6, abs=0.05)
    assert budget.to_mib(66_362_880, 8) == pytest.approx(63.3, abs=0.05)
    assert budget.to_bytes(3, 1) == 1 and budget.to_bytes(9, 1) == 2  # whole bytes, rounded up
    assert budget.MIB == 1024 * 1024


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: budget.to_bytes(10, bits=3), "bits must be one of"),
        (lambda: budget.to_bytes(-1), "non-negative"),
        (lambda: budget.count(object()), "budget knows model types"),
        (lambda: budget.count(AlbertConfig(num_hidden_groups=2)), "one shared layer"),
    ],
)
def test_bad_input_says_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_sizes_are_named_and_still_unpack():
    s = budget.sizes(models.published_config("albert-base-v2"))
    assert (s.kind, s.vocab, s.embedding, s.hidden, s.layers, s.shared) == ("albert", 30000, 128, 768, 12, True)
    V, P, T, H, I, L, E, shared, pooler = s  # the old positional 9-tuple
    assert (V, E, H, shared, pooler) == (30000, 128, 768, True, True)
    distil = budget.Sizes.of(models.published_config("distilbert-base-uncased"))
    assert (distil.segments, distil.heads, distil.pooler) == (0, 12, False)
    unshared = AlbertConfig(num_hidden_groups=2)
    assert budget.Sizes.of(unshared).shared is False  # read, but not countable by budget:
    with pytest.raises(ValueError, match="one shared layer"):
        budget.sizes(unshared)
