import pytest

from bertfamily import data


def test_bbc_news_is_the_full_corpus():
    texts, labels = data.bbc_news()
    assert len(texts) == len(labels) == 2225
    assert sorted(set(labels)) == [0, 1, 2, 3, 4]
    assert all(t.strip() for t in texts)


def test_bbc_split_is_deterministic_and_disjoint():
    a, b = data.bbc_split(), data.bbc_split()
    assert a.train_texts == b.train_texts and a.test_texts == b.test_texts
    assert len(a.train_texts) + len(a.test_texts) == 2127  # 2,225 less 98 exact duplicates
    assert not set(a.train_texts) & set(a.test_texts)
    assert a.classes == data.BBC_CLASSES
    other = data.bbc_split(seed=1)
    assert other.test_texts != a.test_texts


def test_split_is_stratified():
    s = data.bbc_split(test_fraction=0.2)
    for label in range(5):
        share_train = s.train_labels.count(label) / len(s.train_labels)
        share_test = s.test_labels.count(label) / len(s.test_labels)
        assert abs(share_train - share_test) < 0.02


@pytest.mark.parametrize("fraction", [0, 1, -0.1, 1.5])
def test_bad_fraction(fraction):
    with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\)"):
        data.bbc_split(test_fraction=fraction)


def test_ragged_split_input():
    with pytest.raises(ValueError, match="as many labels as texts"):
        data.stratified_split(["a", "b"], [0])


def test_chatterbot_prompts_per_language():
    en, en_topics = data.chatterbot_prompts("en")
    it, it_topics = data.chatterbot_prompts("it")
    assert len(en) > 500 and len(it) > 300
    assert set(it_topics) <= set(en_topics)  # topics are named in English everywhere
    assert len(set(en)) == len(en)


def test_unknown_language_lists_codes():
    with pytest.raises(ValueError, match="unknown language code 'xx'; known: .*it.*uk"):
        data.chatterbot_prompts("xx")


def test_aligned_pairs_are_translations():
    pairs = data.aligned_pairs("it")
    assert len(pairs) > 500
    assert ("What is AI?", "Cos'è l'intelligenza artificiale?") in pairs
    assert len(data.aligned_pairs("uk")) > 300
    with pytest.raises(ValueError):
        data.aligned_pairs("en")
