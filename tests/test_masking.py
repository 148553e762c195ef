"""bertfamily.masking: BERT's corruption, static vs dynamic schedules, XLM's TLM input."""

import math

import pytest
import torch

from bertfamily.masking import IGNORE_INDEX, DynamicMasking, StaticMasking, distinct_views, mask_tokens, tlm_inputs

V, MASK, CLS, SEP, PAD = 1000, 3, 1, 2, 0
SPECIAL = (CLS, SEP, MASK)


def batch(rows=64, length=50, pad_from=40, seed=0):
    """Rows of [CLS] words [SEP] PAD..., words drawn from ids 10..V-1."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, V, (rows, length), generator=g)
    ids[:, 0] = CLS
    ids[:, pad_from - 1] = SEP
    ids[:, pad_from:] = PAD
    return ids


def kwargs(**extra):
    return dict(vocab_size=V, mask_token_id=MASK, special_ids=SPECIAL, pad_token_id=PAD, **extra)


def rates(ids, corrupted, labels):
    chosen = labels != IGNORE_INDEX
    n = int(chosen.sum())
    as_mask = int((chosen & (corrupted == MASK)).sum())
    kept = int((chosen & (corrupted == ids)).sum())
    return n, as_mask / n, (n - as_mask - kept) / n, kept / n


def within(observed, p, n, z=5.0):
    """observed fraction is within z binomial standard errors of p."""
    return abs(observed - p) <= z * math.sqrt(p * (1 - p) / n)


def test_rates_match_15_percent_and_80_10_10():
    ids = batch(rows=2000)
    eligible = int((~torch.isin(ids, torch.tensor([*SPECIAL, PAD]))).sum())
    corrupted, labels = mask_tokens(ids, generator=torch.Generator().manual_seed(1), **kwargs())
    n, as_mask, as_random, kept = rates(ids, corrupted, labels)
    assert within(n / eligible, 0.15, eligible)
    # a random replacement can draw the original id (1 in V): "kept" absorbs it, as in BERT
    assert within(as_mask, 0.8, n) and within(as_random, 0.1 * (1 - 1 / V), n)
    assert within(kept, 0.1 + 0.1 / V, n)
    assert torch.equal(labels[labels != IGNORE_INDEX], ids[labels != IGNORE_INDEX])
    assert torch.equal(corrupted[labels == IGNORE_INDEX], ids[labels == IGNORE_INDEX])


def test_probability_and_split_are_parameters():
    ids = batch(rows=1000)
    corrupted, labels = mask_tokens(
        ids, probability=0.4, split=(0.0, 0.0, 1.0), generator=torch.Generator().manual_seed(2), **kwargs()
    )
    eligible = int((~torch.isin(ids, torch.tensor([*SPECIAL, PAD]))).sum())
    assert within(int((labels != IGNORE_INDEX).sum()) / eligible, 0.4, eligible)
    assert torch.equal(corrupted, ids)  # keep-only: nothing is corrupted, yet labels are set
    corrupted, labels = mask_tokens(ids, split=(1, 0, 0), generator=torch.Generator().manual_seed(2), **kwargs())
    assert torch.all(corrupted[labels != IGNORE_INDEX] == MASK)


def test_special_tokens_and_padding_are_never_chosen():
    ids = batch(rows=500)
    for seed in range(5):
        corrupted, labels = mask_tokens(ids, probability=0.9, generator=torch.Generator().manual_seed(seed), **kwargs())
        protected = torch.isin(ids, torch.tensor([*SPECIAL, PAD]))
        assert torch.all(labels[protected] == IGNORE_INDEX)
        assert torch.equal(corrupted[protected], ids[protected])


def test_attention_mask_and_special_mask_block_positions():
    ids = torch.randint(10, V, (200, 30), generator=torch.Generator().manual_seed(0))
    attention = torch.ones_like(ids)
    attention[:, 20:] = 0
    block = torch.zeros_like(ids, dtype=torch.bool)
    block[:, :5] = True
    _, labels = mask_tokens(
        ids,
        vocab_size=V,
        mask_token_id=MASK,
        probability=0.9,
        attention_mask=attention,
        special_mask=block,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.all(labels[:, 20:] == IGNORE_INDEX) and torch.all(labels[:, :5] == IGNORE_INDEX)
    assert (labels[:, 5:20] != IGNORE_INDEX).float().mean() > 0.8


def test_generator_makes_it_reproducible_and_input_is_untouched():
    ids = batch()
    before = ids.clone()
    a = mask_tokens(ids, generator=torch.Generator().manual_seed(7), **kwargs())
    b = mask_tokens(ids, generator=torch.Generator().manual_seed(7), **kwargs())
    c = mask_tokens(ids, generator=torch.Generator().manual_seed(8), **kwargs())
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
    assert torch.equal(ids, before)


def test_lists_and_single_sequences_are_accepted():
    row = [CLS, 11, 12, 13, 14, SEP]
    corrupted, labels = mask_tokens(row, generator=torch.Generator().manual_seed(0), **kwargs())
    assert corrupted.shape == labels.shape == (6,)
    corrupted, labels = mask_tokens([row, row], generator=torch.Generator().manual_seed(0), **kwargs())
    assert corrupted.shape == (2, 6)


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(probability=0.0), "probability must be in"),
        (dict(probability=1.0), "probability must be in"),
        (dict(probability=1.5), "probability must be in"),
        (dict(split=(0.8, 0.1, 0.2)), "add up to 1"),
        (dict(split=(0.8, 0.2)), "three"),
        (dict(split=(1.1, -0.1, 0.0)), "non-negative"),
        (dict(mask_token_id=V), "mask_token_id"),
    ],
)
def test_bad_arguments_raise(bad, message):
    args = kwargs()
    args.update(bad)
    with pytest.raises(ValueError, match=message):
        mask_tokens(batch(rows=2), **args)


@pytest.mark.parametrize(
    "ids, message",
    [
        ([], "empty"),
        ([[]], "empty"),
        (torch.zeros((0, 5), dtype=torch.long), "empty"),
        ([[CLS, 11, SEP], [CLS, SEP]], "ragged"),
        ([[CLS, 11, V]], r"\[0, 1000\)"),
        ([[CLS, -4, SEP]], r"\[0, 1000\)"),
        (torch.rand(2, 5), "integer"),
    ],
)
def test_bad_batches_raise(ids, message):
    with pytest.raises(ValueError, match=message):
        mask_tokens(ids, **kwargs())


def test_mask_shape_must_match():
    with pytest.raises(ValueError, match="shape"):
        mask_tokens(batch(rows=3), attention_mask=torch.ones(3, 7), **kwargs())


def test_matches_datacollator_for_language_modeling():
    transformers = pytest.importorskip("transformers")
    from bertfamily.models import minilm_tokenizer

    tokenizer = minilm_tokenizer()
    texts = ["The quick brown fox jumps over the lazy dog near the river bank today."] * 400
    enc = tokenizer(texts, padding="max_length", max_length=24, return_tensors="pt", return_special_tokens_mask=True)
    ids = enc["input_ids"]
    collator = transformers.DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=0.15, seed=0, return_tensors="pt"
    )
    theirs = collator.torch_mask_tokens(ids.clone(), special_tokens_mask=enc["special_tokens_mask"])
    ours = mask_tokens(
        ids,
        vocab_size=len(tokenizer),
        mask_token_id=tokenizer.mask_token_id,
        special_ids=tokenizer.all_special_ids,
        pad_token_id=tokenizer.pad_token_id,
        generator=torch.Generator().manual_seed(1),
    )  # not the collator's seed: its bernoulli
    # draws the same uniforms as our torch.rand, so equal seeds would agree trivially
    eligible = int((enc["special_tokens_mask"] == 0).sum())
    stats = []
    for corrupted, labels in (theirs, ours):
        chosen = labels != IGNORE_INDEX
        assert not torch.any(chosen & (enc["special_tokens_mask"] == 1))  # neither touches specials
        n = int(chosen.sum())
        stats.append(
            (
                n / eligible,
                float((corrupted[chosen] == tokenizer.mask_token_id).float().mean()),
                float((corrupted[chosen] == ids[chosen]).float().mean()),
                n,
            )
        )
    (r1, m1, k1, n1), (r2, m2, k2, n2) = stats
    se = math.sqrt(0.15 * 0.85 / eligible)
    assert abs(r1 - r2) < 5 * math.sqrt(2) * se
    assert abs(m1 - m2) < 5 * math.sqrt(0.16 * (1 / n1 + 1 / n2))
    assert abs(k1 - k2) < 5 * math.sqrt(0.09 * (1 / n1 + 1 / n2))


# --------------------------------------------------------------------------- schedules


def test_static_masks_repeat_and_dynamic_masks_change():
    ids = batch(rows=8)
    static = StaticMasking(ids, generator=torch.Generator().manual_seed(0), **kwargs())
    dynamic = DynamicMasking(ids, generator=torch.Generator().manual_seed(0), **kwargs())
    rows = torch.arange(8)
    s0, s1 = static(rows, 0), static(rows, 1)
    assert torch.equal(s0[0], s1[0]) and torch.equal(s0[1], s1[1])
    d0, d1 = dynamic(rows, 0), dynamic(rows, 1)
    assert not torch.equal(d0[1], d1[1])


def test_static_copies_cycle_and_distinct_views_count():
    ids = batch(rows=4)
    g = torch.Generator().manual_seed(0)
    static1 = StaticMasking(ids, generator=g, **kwargs())
    static10 = StaticMasking(ids, copies=10, generator=g, **kwargs())
    dynamic = DynamicMasking(ids, generator=g, **kwargs())
    rows = torch.arange(4)
    assert torch.equal(static10(rows, 3)[1], static10(rows, 13)[1])
    assert not torch.equal(static10(rows, 3)[1], static10(rows, 4)[1])
    assert distinct_views(static1, 0, 40) == 1
    assert distinct_views(static10, 0, 40) == 10
    assert distinct_views(dynamic, 0, 40) == 40  # 39 tokens, 15%: a repeat is vanishingly rare
    with pytest.raises(ValueError, match="copies"):
        StaticMasking(ids, copies=0, **kwargs())
    with pytest.raises(ValueError, match="probability"):
        DynamicMasking(ids, probability=2, **kwargs())


def test_dynamic_checks_arguments_without_touching_the_global_rng():
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    DynamicMasking(batch(rows=2), **kwargs())
    assert torch.equal(torch.rand(1), expected)


# --------------------------------------------------------------------------- TLM


def test_tlm_layout_languages_and_positions():
    first = [[11, 12, 13], [21]]
    second = [[31, 32], [41, 42, 43, 44]]
    out = tlm_inputs(first, second, cls_id=CLS, sep_id=SEP, pad_id=PAD, lang_ids=(5, 6))
    assert set(out) == {"input_ids", "attention_mask", "language_ids", "position_ids", "special_mask"}
    assert all(t.shape == (2, 8) for t in out.values())
    assert out["input_ids"].tolist() == [[CLS, 11, 12, 13, SEP, 31, 32, SEP], [CLS, 21, SEP, 41, 42, 43, 44, SEP]]
    first_row = tlm_inputs([[11]], [[31]], cls_id=CLS, sep_id=SEP, pad_id=PAD)
    assert first_row["input_ids"].tolist() == [[CLS, 11, SEP, 31, SEP]]
    assert first_row["attention_mask"].tolist() == [[1, 1, 1, 1, 1]]
    assert out["language_ids"].tolist() == [[5, 5, 5, 5, 5, 6, 6, 6], [5, 5, 5, 6, 6, 6, 6, 6]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 3, 4, 0, 1, 2], [0, 1, 2, 0, 1, 2, 3, 4]]
    assert out["special_mask"].tolist() == [
        [True, False, False, False, True, False, False, True],
        [True, False, True, False, False, False, False, True],
    ]


def test_tlm_padding_and_masking_across_the_pair():
    g = torch.Generator().manual_seed(0)
    first = [torch.randint(10, V, (int(n),), generator=g).tolist() for n in torch.randint(1, 12, (300,), generator=g)]
    second = [torch.randint(10, V, (int(n),), generator=g).tolist() for n in torch.randint(1, 12, (300,), generator=g)]
    out = tlm_inputs(first, second, cls_id=CLS, sep_id=SEP, pad_id=PAD)
    lengths = torch.tensor([len(a) + len(b) + 3 for a, b in zip(first, second, strict=True)])
    assert out["input_ids"].shape == (300, int(lengths.max()))
    assert torch.equal(out["attention_mask"].sum(1), lengths)
    assert torch.all(out["input_ids"][out["attention_mask"] == 0] == PAD)
    assert torch.all(out["special_mask"][out["attention_mask"] == 0])
    corrupted, labels = mask_tokens(
        out["input_ids"],
        vocab_size=V,
        mask_token_id=MASK,
        probability=0.5,
        special_mask=out["special_mask"],
        generator=g,
    )
    chosen = labels != IGNORE_INDEX
    assert not torch.any(chosen & out["special_mask"])
    assert torch.equal(corrupted[out["special_mask"]], out["input_ids"][out["special_mask"]])
    for lang in (0, 1):  # both halves get masked
        words = (out["language_ids"] == lang) & ~out["special_mask"]
        assert abs(chosen[words].float().mean() - 0.5) < 0.05
    # masking the second sentence only
    only_second = out["special_mask"] | (out["language_ids"] == 0)
    _, labels = mask_tokens(
        out["input_ids"], vocab_size=V, mask_token_id=MASK, probability=0.5, special_mask=only_second, generator=g
    )
    assert torch.all(labels[out["language_ids"] == 0] == IGNORE_INDEX)
    assert torch.any(labels != IGNORE_INDEX)


@pytest.mark.parametrize(
    "first, second, message",
    [
        ([[11], [12]], [[31]], "as many sentences"),
        ([[11], []], [[31], [32]], r"first_ids\[1\] is empty"),
        ([[11]], [[]], r"second_ids\[0\] is empty"),
        ([], [], "empty"),
        ([[1.5]], [[31]], "integer"),
    ],
)
def test_tlm_bad_input_raises(first, second, message):
    with pytest.raises(ValueError, match=message):
        tlm_inputs(first, second, cls_id=CLS, sep_id=SEP, pad_id=PAD)


def test_actions_and_render_name_what_happened():
    from bertfamily.masking import actions, render

    ids = torch.tensor([CLS, 11, 12, 13, 14, SEP])
    corrupted = torch.tensor([CLS, MASK, 77, 13, 14, SEP])
    labels = torch.tensor([IGNORE_INDEX, 11, 12, 13, IGNORE_INDEX, IGNORE_INDEX])
    codes = actions(ids, corrupted, labels, MASK)
    assert codes.tolist() == [0, 1, 2, 3, 0, 0]
    text = render(["[CLS]", "a", "b", "c", "d", "[SEP]"], ["[CLS]", "[MASK]", "z", "c", "d", "[SEP]"], codes)
    assert text == "[CLS] [MASK] <z> (c) d [SEP]"
