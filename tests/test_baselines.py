"""The guessers a masked-language model must beat: kinds of blank, the two-sided bigram, the ladder."""

import pytest
import torch

from bertfamily import baselines
from bertfamily.masking import IGNORE_INDEX
from bertfamily.models import minilm_tokenizer
from bertfamily.pretraining import CompactVocabulary, HeldOut


def test_the_bigram_guesses_the_piece_between_its_neighbours():
    # vocabulary 0..5; 5 is [MASK]. "1 2 3" always; "1 4 1" once.
    train = torch.tensor([[0, 1, 2, 3, 0], [0, 1, 2, 3, 0], [0, 1, 4, 1, 0]])
    bigram = baselines.Bigram(train, 6, special_ids=[0, 5], smoothing=0.1)
    held = HeldOut(
        torch.tensor([[0, 1, 5, 3, 0], [0, 1, 5, 1, 0]]),
        torch.tensor(
            [
                [IGNORE_INDEX, IGNORE_INDEX, 2, IGNORE_INDEX, IGNORE_INDEX],
                [IGNORE_INDEX, IGNORE_INDEX, 4, IGNORE_INDEX, IGNORE_INDEX],
            ]
        ),
    )
    top = bigram.top5(held)
    assert top[:, 0].tolist() == [2, 4]  # the right side decides between 2 and 4
    # a neighbour that is itself a blank gives nothing: word frequency decides that side
    scores = bigram.scores(torch.tensor([5]), torch.tensor([3]))
    assert int(scores.argmax()) == 2
    with pytest.raises(ValueError, match="smoothing must be positive"):
        baselines.Bigram(train, 6, smoothing=0)


def test_the_bigrams_top_five_are_the_five_best_scores():
    """top5 ranks without logarithms; it must pick what scores() ranks highest, blank by blank."""
    g = torch.Generator().manual_seed(0)
    train = torch.randint(1, 40, (30, 12), generator=g)
    bigram = baselines.Bigram(train, 41, special_ids=[0, 40], smoothing=3.0)
    ids = torch.randint(1, 40, (20, 12), generator=g)
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[:, 1::3] = ids[:, 1::3]
    top = bigram.top5(HeldOut(ids, labels), batch=7)
    rows, cols = torch.nonzero(labels != IGNORE_INDEX, as_tuple=True)
    scores = bigram.scores(ids[rows, cols - 1], ids[rows, (cols + 1).clamp(max=11)])
    best = scores.topk(5, dim=-1).values
    assert torch.allclose(scores.gather(1, top), best, rtol=0, atol=1e-12)


def test_the_ladder_scores_each_kind_of_hidden_blank():
    target = torch.tensor([1, 2, 3, 4])
    hidden = torch.tensor([True, True, True, False])
    kinds = ["punctuation", "content word", "content word", "function word"]
    guesses = {
        "always 1": torch.tensor([1, 1, 1, 1]),
        "top five": torch.tensor([[2, 1, 0, 0, 0], [2, 0, 0, 0, 0], [0, 0, 0, 0, 3], [4, 0, 0, 0, 0]]),
    }
    table = baselines.ladder(guesses, target, hidden, kinds)
    assert table["always 1"]["all"] == (pytest.approx(1 / 3), pytest.approx(1 / 3), 3)
    assert table["top five"]["content word"] == (0.5, 1.0, 2)
    assert table["top five"]["function word"][2] == 0  # the one function word was kept, not hidden


def test_blank_kinds_sort_punctuation_function_content_and_pieces():
    tokenizer = minilm_tokenizer()
    text = "the playwright said , embarrassingly , no . which war with 2005 ."
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    keep = [
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        tokenizer.mask_token_id,
    ]
    words = CompactVocabulary(ids, keep=keep, unk_id=tokenizer.unk_token_id)
    compact = words.encode(ids)
    labels = torch.where(torch.arange(compact.shape[1]) > 0, compact, IGNORE_INDEX)
    labels[0, -1] = IGNORE_INDEX  # [SEP]
    kinds = baselines.blank_kinds(HeldOut(compact, labels), words, tokenizer)
    pieces = tokenizer.convert_ids_to_tokens(ids[0, 1:-1].tolist())
    expected = {
        "the": "function word",
        "said": "content word",
        ",": "punctuation",
        "no": "function word",
        ".": "punctuation",
        "which": "function word",
        "with": "function word",
        "war": "content word",
        "2005": "number or piece",
    }  # a word's length no longer decides: the stop-word list does
    for piece, kind in zip(pieces, kinds, strict=True):
        if piece in expected:
            assert kind == expected[piece], piece
    assert kinds.count("number or piece") >= 3  # "playwright" and "embarrassingly" are cut into pieces


def test_most_frequent_leaves_out_the_special_pieces():
    counts = torch.tensor([100, 5, 50, 7, 1])
    assert baselines.most_frequent(counts, special_ids=[0], k=2).tolist() == [2, 3]
