"""bertfamily.multilingual: vocabulary growth, WordPiece training, sharing statistics, probes."""

import pytest
import torch

from bertfamily import multilingual as ml
from bertfamily import transfer

EN = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog"]
IT = ["il gatto sedeva sul tappeto", "il cane sedeva sul tronco", "un gatto e un cane"]


def test_words_any_script():
    assert ml.words("Привіт, як справи? Ciao!") == ["Привіт", "як", "справи", "Ciao"]


def test_vocabulary_growth_counts():
    read, distinct = ml.vocabulary_growth(["a b a", "c A"])
    assert read.tolist() == [1, 2, 3, 4, 5]
    assert distinct.tolist() == [1, 2, 2, 3, 3]  # lower-cased: A == a
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


def test_wordpiece_is_the_same_every_run():
    # tokenizers numbers its "##" pieces in hash order and breaks ties between equally frequent
    # merges by those numbers: unguarded, 9 of 10 runs on this tiny corpus gave another vocabulary
    runs = [ml.train_wordpiece(EN + IT, vocab_size=60, min_frequency=1) for _ in range(10)]
    assert all(tok.get_vocab() == runs[0].get_vocab() for tok in runs)
    # the "##" pieces numbered first are ordinary pieces, not special tokens
    assert [t.content for t in runs[0].get_added_tokens_decoder().values()] == [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    ]
    assert runs[0].decode(runs[0].encode("gattodog").ids) == "gattodog"


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
    assert transfer.majority_baseline(["a", "b", "a", "a"]) == 0.75
    with pytest.raises(ValueError):
        transfer.majority_baseline([])


def _blobs(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.cat([torch.randn(n, 8, generator=g) + 3, torch.randn(n, 8, generator=g) - 3])
    return x, ["pos"] * n + ["neg"] * n


def test_probe_learns_separable_data_and_is_deterministic():
    x, y = _blobs()
    model, classes = transfer.train_probe(x, y, epochs=100)
    assert transfer.accuracy(model, classes, x, y) == 1.0
    again, _ = transfer.train_probe(x, y, epochs=100, seed=5)  # linear probe: zero init, seed irrelevant
    assert torch.equal(model[1].weight, again[1].weight)
    head, _ = transfer.train_probe(x, y, hidden=16, epochs=100, seed=1)
    assert transfer.accuracy(head, classes, x, y) == 1.0


def test_probe_bad_input():
    x, y = _blobs()
    with pytest.raises(ValueError):
        transfer.train_probe(x[:-1], y)
    with pytest.raises(ValueError):
        transfer.train_probe(x, ["a"] * len(y))


def test_transfer_table_restricts_topics():
    x, y = _blobs()
    third = torch.randn(10, 8) * 0.1
    train_x = torch.cat([x, third])
    train_y = y + ["other"] * 10
    # the target has only pos/neg: 'other' must be dropped from training
    table = transfer.transfer_table(train_x, train_y, {"xx": (x, y)}, epochs=100)
    row = table["xx"]
    assert row["topics"] == 2 and row["train"] == len(y) and row["n"] == len(y)
    assert row["majority"] == 0.5 and row["accuracy"] == [1.0]
    with pytest.raises(ValueError):
        transfer.transfer_table(x, y, {"xx": (x[:3], ["zzz"] * 3)})


def test_mix_languages():
    assert ml.mix_languages("I like red apples", "mi piacciono le mele rosse") == "I like le mele rosse"
    with pytest.raises(ValueError):
        ml.mix_languages("a", "b", cut=1.5)


def test_halves_keep_translations_together():
    # Italian files are translations of the English ones: where a file has the same number of
    # conversations in both languages, a prompt and its translation land in the same half.
    from bertfamily import data

    en_text, en_topic = ml.labelled_prompts("en")
    it_text, it_topic = ml.labelled_prompts("it")
    en_half = dict(zip(en_text, ml.labelled_halves("en"), strict=True))
    it_half = dict(zip(it_text, ml.labelled_halves("it"), strict=True))
    assert set(ml.labelled_halves("it")) == {0, 1} and len(it_half) == len(it_text)
    pairs = [(e, i) for e, i in data.aligned_pairs("it") if e in en_half and i in it_half]
    assert len(pairs) > 100
    assert sum(en_half[e] == it_half[i] for e, i in pairs) / len(pairs) > 0.95
    positions = data.chatterbot_positions("en")
    assert len(positions) == len(en_text) and all(0 <= p < 1 for p in positions)


def _leaky_target(n=40, seed=0):
    """English rows and target rows that are exact copies of them (a translation leak): a probe
    that trains on the copy's half scores perfectly; trained on the other half it must generalise."""
    g = torch.Generator().manual_seed(seed)
    labels = ["a", "b"] * n
    centres = {"a": torch.ones(8), "b": -torch.ones(8)}
    x = torch.stack([centres[y] * 0.3 + torch.randn(8, generator=g) for y in labels])
    halves = [(i // 2) % 2 for i in range(len(labels))]  # row i and its copy share a half
    return (x, labels, halves), (x.clone(), list(labels), list(halves))


def test_transfer_evaluation_separates_leakage():
    english, target = _leaky_target()
    r = transfer.transfer_evaluation(english, target, epochs=200)
    assert r["n"] == 80 and r["topics"] == 2 and r["majority"] == 0.5
    # the copies are in the training set of the "leaky" arm and a separable-enough task: it is better
    assert r["leaky"].mean() > r["zero_shot"].mean()
    # here the target *is* the English, so zero-shot and in-language are the same probe, same rows
    assert torch.equal(r["zero_shot"], r["in_language"])
    assert set(r["zero_shot"].tolist()) <= {0.0, 1.0}


def test_transfer_evaluation_matches_sizes(monkeypatch):
    """With match_sizes every probe trains on as many rows of each topic as the in-language one."""
    from collections import Counter

    english, target = _leaky_target()
    x, y, h = english
    triple = (torch.cat([x, x, x]), y * 3, h * 3)  # English with three times the target's rows
    seen, real = [], transfer.train_probe
    monkeypatch.setattr(
        transfer, "train_probe", lambda f, labels, *a, **k: seen.append(Counter(labels)) or real(f, labels, *a, **k)
    )
    r = transfer.transfer_evaluation(triple, target, match_sizes=True, draws=3, epochs=50)
    assert len(seen) == 2 * 3 + 2 + 2 * 3  # zero-shot and leaky: 2 halves x 3 draws; in-language: 2
    assert all(c == Counter({"a": 20, "b": 20}) for c in seen), seen
    assert set((3 * r["zero_shot"]).round().tolist()) <= {0.0, 1.0, 2.0, 3.0}
    # where English has no more rows than the target, matching changes nothing
    assert torch.equal(
        transfer.transfer_evaluation(english, target, match_sizes=True, epochs=50)["zero_shot"],
        transfer.transfer_evaluation(english, target, epochs=50)["zero_shot"],
    )
    with pytest.raises(ValueError, match="draws must be a positive integer"):
        transfer.transfer_evaluation(english, target, match_sizes=True, draws=0)


def test_transfer_evaluation_bad_input():
    english, (x, y, h) = _leaky_target()
    with pytest.raises(ValueError, match="halves must be 0 or 1"):
        transfer.transfer_evaluation(english, (x, y, [2] * len(y)))
    with pytest.raises(ValueError, match="one row each"):
        transfer.transfer_evaluation(english, (x[:5], y, h))
    with pytest.raises(ValueError, match="fewer than two topics"):
        transfer.transfer_evaluation(english, (x, ["zzz"] * len(y), h))


def test_equal_sample_sharing():
    class Split:
        def tokenize(self, text):
            return text.split()

    sentences = {"en": ["a b", "a c", "a d", "x y"], "it": ["a b", "q r"]}
    langs, mean, sd = ml.equal_sample_sharing(Split(), sentences, draws=5)
    assert langs == ["en", "it"] and mean.shape == (2, 2) and sd.shape == (2, 2)
    assert torch.all(mean[0, 1] <= 1) and mean[0, 0] == 1
    # with all of the small language and one identical sentence drawn, overlap can reach 2/3
    assert 0 <= mean[0, 1] <= 2 / 3
    with pytest.raises(ValueError, match="smallest language"):
        ml.equal_sample_sharing(Split(), sentences, n=3)
