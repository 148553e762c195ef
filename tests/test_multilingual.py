"""bertfamily.multilingual: vocabulary growth, WordPiece training, sharing statistics, probes."""
import pytest
import torch

from bertfamily import multilingual as ml

EN = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog"]
IT = ["il gatto sedeva sul tappeto", "il cane sedeva sul tronco", "un gatto e un cane"]


def test_words_any_script():
    assert ml.words("Привіт, як справи? Ciao!") == ["Привіт", "як", "справи", "Ciao"]


def test_vocabulary_growth_counts():
    read, distinct = ml.vocabulary_growth(["a b a", "c A"])
    assert read.tolist() == [1, 2, 3, 4, 5]
    assert distinct.tolist() == [1, 2, 2, 3, 3]      # lower-cased: A == a
    _, cased = ml.vocabulary_growth(["a b a", "c A"], lowercase=False)
    assert cased.tolist()[-1] == 4


@pytest.mark.parametrize("bad", [[], ["", "  "], "one string"])
def test_empty_or_bad_corpus(bad):
    with pytest.raises(ValueError):
        ml.vocabulary_growth(bad)
    with pytest.raises(ValueError):
        ml.train_wordpiece(bad)


def test_wordpiece_covers_everything_without_unknowns():
    tok = ml.train_wordpiece(EN + IT, vocab_size=60, min_frequency=1)
    assert tok.get_vocab_size() <= 60
    stats = ml.token_stats(tok, EN + IT)
    assert stats["unknown"] == 0
    assert stats["pieces_per_word"] >= 1.0
    # an unseen word made of seen letters is split into pieces, not [UNK]
    assert "[UNK]" not in tok.encode("gattodog", add_special_tokens=False).tokens
    # a letter never seen in training is unknown
    assert ml.token_stats(tok, ["Ω"])["unknown_rate"] == 1.0


def test_wordpiece_varies_only_at_the_margin():
    # tokenizers breaks ties between equally frequent merges in no fixed order: ids (and, on big
    # corpora, a few pieces at the end) may differ between runs, the bulk of the vocabulary does not
    a = set(ml.train_wordpiece(EN + IT, vocab_size=60, min_frequency=1).get_vocab())
    b = set(ml.train_wordpiece(EN + IT, vocab_size=60, min_frequency=1).get_vocab())
    assert len(a & b) >= 0.9 * len(a | b)


def test_sharing_statistics():
    pieces = {"a": {"x", "y", "z"}, "b": {"y", "z", "w"}, "c": {"q"}}
    assert ml.shared_share(pieces) == pytest.approx(2 / 5)
    langs, m = ml.pair_sharing(pieces)
    assert langs == ["a", "b", "c"]
    assert m[0, 1] == pytest.approx(2 / 4) and m[1, 0] == m[0, 1]
    assert m[0, 2] == 0 and torch.all(torch.diag(m) == 1)
    with pytest.raises(ValueError):
        ml.shared_share({"a": {"x"}})


def test_pieces_by_language_drops_punctuation():
    tok = ml.train_wordpiece(EN + IT, vocab_size=80, min_frequency=1)
    pieces = ml.pieces_by_language(tok, {"en": ["the cat !"], "it": ["il gatto ?"]})
    assert "!" not in pieces["en"] and "?" not in pieces["it"]
    assert "the" in pieces["en"]
    with pytest.raises(ValueError):
        ml.pieces_by_language(tok, {})


def test_unknown_language_code():
    with pytest.raises(ValueError, match="unknown language code"):
        ml.labelled_prompts("xx")
    with pytest.raises(ValueError, match="unknown language code"):
        ml.chatterbot_sentences("klingon")


def test_spanish_topics_renamed_to_english():
    _, es = ml.labelled_prompts("es")
    _, en = ml.labelled_prompts("en")
    assert set(es) <= set(en)


def test_majority_baseline():
    assert ml.majority_baseline(["a", "b", "a", "a"]) == 0.75
    with pytest.raises(ValueError):
        ml.majority_baseline([])


def _blobs(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.cat([torch.randn(n, 8, generator=g) + 3, torch.randn(n, 8, generator=g) - 3])
    return x, ["pos"] * n + ["neg"] * n


def test_probe_learns_separable_data_and_is_deterministic():
    x, y = _blobs()
    model, classes = ml.train_probe(x, y, epochs=100)
    assert ml.accuracy(model, classes, x, y) == 1.0
    again, _ = ml.train_probe(x, y, epochs=100, seed=5)   # linear probe: zero init, seed irrelevant
    assert torch.equal(model[1].weight, again[1].weight)
    head, _ = ml.train_probe(x, y, hidden=16, epochs=100, seed=1)
    assert ml.accuracy(head, classes, x, y) == 1.0


def test_probe_bad_input():
    x, y = _blobs()
    with pytest.raises(ValueError):
        ml.train_probe(x[:-1], y)
    with pytest.raises(ValueError):
        ml.train_probe(x, ["a"] * len(y))


def test_transfer_table_restricts_topics():
    x, y = _blobs()
    third = torch.randn(10, 8) * 0.1
    train_x = torch.cat([x, third])
    train_y = y + ["other"] * 10
    # the target has only pos/neg: 'other' must be dropped from training
    table = ml.transfer_table(train_x, train_y, {"xx": (x, y)}, epochs=100)
    row = table["xx"]
    assert row["topics"] == 2 and row["train"] == len(y) and row["n"] == len(y)
    assert row["majority"] == 0.5 and row["accuracy"] == [1.0]
    with pytest.raises(ValueError):
        ml.transfer_table(x, y, {"xx": (x[:3], ["zzz"] * 3)})


def test_mix_languages():
    assert ml.mix_languages("I like red apples", "mi piacciono le mele rosse") == "I like le mele rosse"
    with pytest.raises(ValueError):
        ml.mix_languages("a", "b", cut=1.5)
