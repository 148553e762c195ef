"""Showing a model's guesses: which blanks are picked, and how they are cut and printed."""

import pytest
import torch

from bertfamily import fill
from bertfamily.masking import IGNORE_INDEX
from bertfamily.models import minilm_tokenizer
from bertfamily.pretraining import CompactVocabulary, HeldOut

TEXT = (
    "the minister said on tuesday that the government would publish its plans for the railway "
    "network before parliament returns in september and that ticket prices would not rise"
)


@pytest.fixture(scope="module")
def setup():
    tokenizer = minilm_tokenizer()
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    keep = [
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        tokenizer.mask_token_id,
    ]
    words = CompactVocabulary(ids, keep=keep, unk_id=tokenizer.unk_token_id)
    compact = words.encode(ids)
    labels = torch.full_like(compact, IGNORE_INDEX)
    corrupted = compact.clone()
    for position in (3, 6, 8):  # "said", "that", "government"
        labels[0, position] = compact[0, position]
        corrupted[0, position] = words(tokenizer.mask_token_id)
    return tokenizer, words, HeldOut(corrupted.repeat(3, 1), labels.repeat(3, 1))


def test_pick_blanks_takes_the_first_long_masked_word_of_every_nth_block(setup):
    tokenizer, words, held = setup
    blanks = fill.pick_blanks(held, words, tokenizer, count=5, every=2, min_letters=5)
    assert blanks == [(0, 8), (2, 8)]  # "said" and "that" are too short; blocks 0 and 2 only
    word = tokenizer.convert_ids_to_tokens(int(words.decode(held.labels[0, 8])))
    assert word == "government"
    with pytest.raises(ValueError, match="positive integers"):
        fill.pick_blanks(held, words, tokenizer, count=0)


def test_context_draws_the_blank_and_restores_the_other_blanks(setup):
    tokenizer, words, held = setup
    text = fill.context(held.input_ids[0], held.labels[0], 8, words, tokenizer, width=4)
    assert text == "…on tuesday that the ____ would publish its plans…"


def test_window_keeps_the_blank_inside_a_shorter_block(setup):
    tokenizer, words, held = setup
    ids, labels = held.input_ids[0], held.labels[0]
    cut, at = fill.window(ids, labels, 8, 8, cls_id=words(tokenizer.cls_token_id), sep_id=words(tokenizer.sep_token_id))
    assert cut.shape[0] == 8 and cut[0] == words(tokenizer.cls_token_id) and cut[-1] == words(tokenizer.sep_token_id)
    assert cut[at] == words(tokenizer.mask_token_id) and (cut == words(tokenizer.mask_token_id)).sum() == 1
    # a blank near the start stays where it is
    cut, at = fill.window(ids, labels, 3, 8, cls_id=0, sep_id=1)
    assert at == 3 and cut[at] == words(tokenizer.mask_token_id)


def test_top_guesses_are_sorted_probabilities(setup):
    tokenizer, words, held = setup
    from bertfamily.pretraining import tiny_bert, tiny_bert_config

    model = tiny_bert(tiny_bert_config(words.size, max_positions=64))
    guesses = fill.top_guesses(model, held.input_ids[0], 8, words, tokenizer, k=3)
    assert len(guesses) == 3 and all(isinstance(w, str) for w, _ in guesses)
    probabilities = [p for _, p in guesses]
    assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1


def test_showcase_blanks_need_context_on_both_sides_and_skip_the_headline(setup):
    tokenizer, words, held = setup
    articles = torch.tensor([0, 0, 1])  # blocks 0 and 1 are one article's, block 2 another's
    # position 8 ("government") has its neighbours unmasked within 1 piece; 6 ("that") is 2 from 8
    chosen = fill.showcase_blanks(held, words, tokenizer, articles, count=5, min_letters=5, margin=1, skip_first=0)
    assert chosen == [(0, 8), (2, 8)]  # one per article: block 1 belongs to article 0, already shown
    # with 2 pieces of margin, "that" two pieces before is a blank in the window: nothing qualifies
    assert fill.showcase_blanks(held, words, tokenizer, articles, min_letters=5, margin=2, skip_first=0) == []
    # an article's first block skips its first pieces (the headline); a later block does not
    late = fill.showcase_blanks(held, words, tokenizer, articles, min_letters=5, margin=1, skip_first=10)
    assert late == [(1, 8)]  # article 0's second block; article 1 has only its first
    with pytest.raises(ValueError, match="count must be a positive integer"):
        fill.showcase_blanks(held, words, tokenizer, articles, count=0)


def test_showcase_blanks_can_leave_out_function_words(setup):
    tokenizer, words, held = setup
    articles = torch.tensor([0, 1, 2])
    # "said" (position 3) comes first, then "that" (6); both listed, "government" (8); all listed, none
    shown = fill.showcase_blanks(held, words, tokenizer, articles, min_letters=4, margin=1, skip_first=0)
    assert shown == [(0, 3), (1, 3), (2, 3)]
    assert fill.showcase_blanks(
        held, words, tokenizer, articles, min_letters=4, margin=1, skip_first=0, stop_words={"said", "that"}
    ) == [(0, 8), (1, 8), (2, 8)]
    assert (
        fill.showcase_blanks(
            held,
            words,
            tokenizer,
            articles,
            min_letters=4,
            margin=1,
            skip_first=0,
            stop_words={"said", "that", "government"},
        )
        == []
    )


def test_random_blanks_take_any_kind_one_per_article_and_repeat_with_the_seed(setup):
    tokenizer, words, held = setup
    articles = torch.tensor([0, 1, 2])
    every = fill.random_blanks(held, words, tokenizer, articles, count=5, margin=0, skip_first=0)
    assert every == [(0, 3), (1, 3), (2, 3)]  # the first fair blank of each article ("said", any kind)
    two = fill.random_blanks(held, words, tokenizer, articles, count=2, seed=3, margin=0, skip_first=0)
    assert len(two) == 2 and set(two) <= set(every) and two == sorted(two)
    assert two == fill.random_blanks(held, words, tokenizer, articles, count=2, seed=3, margin=0, skip_first=0)
    with pytest.raises(ValueError, match="count must be a positive integer"):
        fill.random_blanks(held, words, tokenizer, articles, count=0)


def test_guesses_at_are_top_guesses_and_keep_the_training_mode(setup):
    from bertfamily.pretraining import tiny_bert, tiny_bert_config

    tokenizer, words, held = setup
    model = tiny_bert(tiny_bert_config(words.size, max_positions=64, dropout=0.1)).train()
    out = fill.guesses_at(model, held, [(0, 8), (1, 3)], words, tokenizer, k=2)
    assert model.training  # the training loop calls it between steps
    expected = fill.top_guesses(model, held.input_ids[1], 3, words, tokenizer, k=2)
    assert [w for w, _ in out[1]] == [w for w, _ in expected] and len(out) == 2
    assert out[1][0][1] == pytest.approx(expected[0][1], abs=1e-4)


def test_guess_fills_every_mask_and_explains_bad_input(setup):
    from bertfamily.pretraining import tiny_bert, tiny_bert_config

    tokenizer, words, _ = setup
    model = tiny_bert(tiny_bert_config(words.size, max_positions=40), seed=0)
    answers = fill.guess(model, "the [MASK] said that the [MASK] would publish", words, tokenizer, k=3)
    assert len(answers) == 2 and all(len(a) == 3 for a in answers)
    assert all(a[0][1] >= a[1][1] >= a[2][1] for a in answers)
    with pytest.raises(ValueError, match=r"at least one \[MASK\]"):
        fill.guess(model, "no blank here", words, tokenizer)
    with pytest.raises(ValueError, match="reads at most 40"):
        fill.guess(model, "[MASK] " + "word " * 50, words, tokenizer)
