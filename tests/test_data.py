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
    sides = (a.train_texts, a.validation_texts, a.test_texts)
    assert sum(map(len, sides)) == 2127  # 2,225 less 98 exact duplicates
    assert not set(a.train_texts) & set(a.test_texts)
    assert not set(a.validation_texts) & (set(a.train_texts) | set(a.test_texts))
    assert a.classes == data.BBC_CLASSES
    other = data.bbc_split(seed=1)
    assert other.test_texts != a.test_texts


def test_split_is_stratified():
    s = data.bbc_split(test_fraction=0.2)
    for label in range(5):
        share_train = s.train_labels.count(label) / len(s.train_labels)
        share_test = s.test_labels.count(label) / len(s.test_labels)
        assert abs(share_train - share_test) < 0.03  # near-copy groups moved whole shift a share a little


def test_no_article_shares_half_its_ngrams_with_an_article_of_another_side():
    """The corpus holds the same story filed twice, edited: no test (or validation) article may share half
    of its word 8-grams with a training article, nor a training article with a held-out one."""
    s = data.bbc_split()
    texts = [*s.train_texts, *s.validation_texts, *s.test_texts]
    side = [0] * len(s.train_texts) + [1] * len(s.validation_texts) + [2] * len(s.test_texts)
    grams = [data.word_ngrams(t) for t in texts]
    index = {}
    for i, g in enumerate(grams):
        for gram in g:
            index.setdefault(gram, []).append(i)
    worst = 0.0
    for i, g in enumerate(grams):
        hits = {}
        for gram in g:
            for j in index[gram]:
                if side[j] != side[i]:
                    hits[j] = hits.get(j, 0) + 1
        worst = max(worst, max(hits.values(), default=0) / max(1, len(g)))
    assert worst < 0.5, f"an article shares {worst:.0%} of its word 8-grams with an article of another side"


def test_near_copy_groups_join_texts_that_share_half_their_ngrams():
    story = " ".join(f"word{i}" for i in range(40))
    edited = story.replace("word39", "changed")
    other = " ".join(f"other{i}" for i in range(40))
    groups = data.near_copy_groups([story, other, edited])
    assert groups[0] == groups[2] != groups[1]
    assert data.shared_ngrams(edited, [other, story]) > 0.9


def test_the_first_training_articles_stay_in_place():
    """Lessons 1 and 4 train on the first 800 training articles: the near-copy groups join the training side
    after them, so those articles are those of the plain stratified split."""
    texts, labels = data.bbc_news()
    unique = dict(zip(texts, labels, strict=True))
    plain = data.stratified_split(list(unique), list(unique.values()), 0.2, 0, data.BBC_CLASSES)
    assert data.bbc_split().train_texts[:800] == plain.train_texts[:800]


def test_bad_validation_size():
    with pytest.raises(ValueError, match="validation must be a non-negative number"):
        data.bbc_split(validation=-1)


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
