"""bertfamily.pretraining: the tiny masked-LM toolkit (tiny configs, seconds)."""

import pytest
import torch

from bertfamily.masking import IGNORE_INDEX, DynamicMasking, StaticMasking, mask_tokens
from bertfamily.pretraining import (
    CompactVocabulary,
    HeldOut,
    evaluate_mlm,
    masked_lm_loss,
    tiny_bert,
    tiny_bert_config,
    token_blocks,
    train_mlm,
)

CLS, SEP, PAD, MASK, UNK = 101, 102, 0, 103, 100


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class WordTokenizer:
    """Stands in for a WordPiece tokenizer: one id per whitespace word (ids from 1000 up)."""

    cls_token_id, sep_token_id = CLS, SEP

    def __call__(self, texts, add_special_tokens=False, verbose=True):
        return {"input_ids": [[1000 + int(w) for w in t.split()] for t in texts]}


def test_token_blocks_cut_texts_into_framed_blocks():
    texts = [" ".join(str(i) for i in range(10)), " ".join(str(i) for i in range(3))]
    blocks = token_blocks(WordTokenizer(), texts, length=5)
    assert blocks.tolist() == [
        [CLS, 1000, 1001, 1002, SEP],
        [CLS, 1003, 1004, 1005, SEP],
        [CLS, 1006, 1007, 1008, SEP],
        [CLS, 1000, 1001, 1002, SEP],
    ]
    assert token_blocks(WordTokenizer(), texts, length=5, max_blocks_per_text=1).shape == (2, 5)
    with pytest.raises(ValueError, match="length"):
        token_blocks(WordTokenizer(), texts, length=2)
    with pytest.raises(ValueError, match="no text"):
        token_blocks(WordTokenizer(), ["1 2"], length=10)
    with pytest.raises(ValueError, match="empty"):
        token_blocks(WordTokenizer(), [], length=10)


def test_compact_vocabulary_round_trip_and_unknowns():
    ids = torch.tensor([[CLS, 5000, 5000, 7000, SEP], [CLS, 7000, 5000, 9000, SEP]])
    vocab = CompactVocabulary(ids, keep=[PAD, UNK, CLS, SEP, MASK], unk_id=UNK)
    assert vocab.size == 5 + 3
    assert [vocab(i) for i in (PAD, UNK, CLS, SEP, MASK)] == [0, 1, 2, 3, 4]
    assert vocab(5000) == 5  # most frequent first
    compact = vocab.encode(ids)
    assert int(compact.max()) < vocab.size
    assert torch.equal(vocab.decode(compact), ids)
    assert vocab(8000) == vocab(UNK) and vocab(10**6) == vocab(UNK)
    rare = CompactVocabulary(ids, keep=[PAD, CLS, SEP], unk_id=UNK, min_count=2)
    assert rare(9000) == rare(UNK) and rare(7000) != rare(UNK)


def test_tiny_config_and_seeded_weights():
    config = tiny_bert_config(50, hidden=16, layers=1, heads=2, max_positions=12)
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size) == (16, 1, 64)
    a, b, c = tiny_bert(config, seed=1), tiny_bert(config, seed=1), tiny_bert(config, seed=2)
    wa, wb, wc = (m.bert.embeddings.word_embeddings.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    with pytest.raises(ValueError, match="divisible"):
        tiny_bert_config(50, hidden=15, heads=2)
    with pytest.raises(ValueError, match="vocab_size"):
        tiny_bert_config(0)
    with pytest.raises(ValueError, match="dropout"):
        tiny_bert_config(50, dropout=1.0)


def test_masked_lm_loss_equals_transformers_loss():
    config = tiny_bert_config(60, hidden=16, layers=1, max_positions=16)
    model = tiny_bert(config).eval()
    ids = torch.randint(5, 60, (4, 16), generator=torch.Generator().manual_seed(0))
    corrupted, labels = mask_tokens(
        ids, vocab_size=60, mask_token_id=4, probability=0.3, generator=torch.Generator().manual_seed(0)
    )
    ours, correct, n = masked_lm_loss(model, corrupted, labels)
    theirs = model(input_ids=corrupted, labels=labels).loss
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert n == int((labels != IGNORE_INDEX).sum()) and 0 <= correct <= n
    result = evaluate_mlm(model, HeldOut(corrupted, labels), batch_size=3)
    assert abs(result["loss"] - theirs.item()) < 1e-4 and result["targets"] == n


def test_evaluate_restores_mode_and_rejects_empty_targets():
    config = tiny_bert_config(30, hidden=16, layers=1, max_positions=8)
    model = tiny_bert(config).train()
    ids = torch.randint(5, 30, (2, 8))
    evaluate_mlm(model, HeldOut.fixed_mask(ids, seed=0, vocab_size=30, mask_token_id=4, probability=0.5))
    assert model.training
    with pytest.raises(ValueError, match="no masked"):
        evaluate_mlm(model, (ids, torch.full_like(ids, IGNORE_INDEX)))


def test_fixed_mask_is_the_same_for_every_model():
    ids = torch.randint(5, 30, (6, 10), generator=torch.Generator().manual_seed(0))
    a = HeldOut.fixed_mask(ids, seed=3, vocab_size=30, mask_token_id=4)
    b = HeldOut.fixed_mask(ids, seed=3, vocab_size=30, mask_token_id=4)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)


def _memorisation_setup():
    vocab = 40
    ids = torch.randint(5, vocab, (16, 12), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = 1, 2
    kwargs = dict(vocab_size=vocab, mask_token_id=4, special_ids=(1, 2))
    config = tiny_bert_config(vocab, hidden=32, layers=1, heads=2, max_positions=12)
    return ids, kwargs, config


def test_training_is_deterministic_and_static_memorises_its_masks():
    ids, kwargs, config = _memorisation_setup()
    fresh = HeldOut.fixed_mask(ids, seed=99, **kwargs)  # the same text, masks never trained on
    runs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(0)
        static = StaticMasking(ids, generator=g, **kwargs)
        model = tiny_bert(config, seed=0)
        history = train_mlm(
            model, static, steps=100, batch_size=8, lr=1e-2, generator=g, held_out=fresh, eval_every=50, progress=False
        )
        runs.append((history, model, static))
    (h1, model, static), (h2, _, _) = runs
    assert h1.train_loss == h2.train_loss and h1.eval_loss == h2.eval_loss
    assert h1.eval_steps == [50, 100] and h1.epochs == 50
    own = evaluate_mlm(model, static(torch.arange(len(static)), 0))
    assert own["accuracy"] > 0.9  # its own blanks: memorised
    assert h1.eval_loss[-1] > own["loss"] + 1.0  # other blanks of the same text: not


def test_train_mlm_rejects_bad_arguments():
    ids, kwargs, config = _memorisation_setup()
    dynamic = DynamicMasking(ids, **kwargs)
    model = tiny_bert(config)
    with pytest.raises(ValueError, match="steps"):
        train_mlm(model, dynamic, steps=0, progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        train_mlm(model, dynamic, steps=1, batch_size=17, progress=False)
    with pytest.raises(ValueError, match="lr"):
        train_mlm(model, dynamic, steps=1, batch_size=4, lr=0, progress=False)


def test_extra_encoder_inputs_reach_the_model_in_training_and_evaluation():
    """TLM needs language ids and positions: a masking schedule may return them as a third item."""
    from bertfamily.masking import tlm_inputs

    g = torch.Generator().manual_seed(0)
    first = [torch.randint(10, 40, (int(n),), generator=g).tolist() for n in torch.randint(2, 6, (8,), generator=g)]
    second = [torch.randint(10, 40, (int(n),), generator=g).tolist() for n in torch.randint(2, 6, (8,), generator=g)]
    pair = tlm_inputs(first, second, cls_id=1, sep_id=2, pad_id=0)
    extra = {
        "attention_mask": pair["attention_mask"],
        "token_type_ids": pair["language_ids"],
        "position_ids": pair["position_ids"],
    }
    kwargs = dict(vocab_size=40, mask_token_id=4, special_mask=pair["special_mask"], probability=0.3)
    config = tiny_bert_config(40, hidden=16, layers=1, max_positions=16, type_vocab_size=2)
    model = tiny_bert(config)

    class Schedule:  # dynamic TLM masking: a fresh mask across both sentences, extra inputs alongside
        def __len__(self):
            return 8

        def __call__(self, rows, epoch):
            corrupted, labels = mask_tokens(
                pair["input_ids"][rows], generator=g, **{**kwargs, "special_mask": pair["special_mask"][rows]}
            )
            return corrupted, labels, {key: value[rows] for key, value in extra.items()}

    history = train_mlm(model, Schedule(), steps=3, batch_size=4, generator=g, progress=False)
    assert len(history.train_loss) == 3
    held = HeldOut.fixed_mask(
        pair["input_ids"],
        seed=0,
        attention_mask=pair["attention_mask"],
        model_inputs={k: v for k, v in extra.items() if k != "attention_mask"},
        **kwargs,
    )
    with_positions = evaluate_mlm(model, held)
    without = evaluate_mlm(model, HeldOut(held.input_ids, held.labels, held.attention_mask))
    assert with_positions["targets"] == without["targets"] > 0
    assert with_positions["loss"] != without["loss"]  # the positions and language ids were used


def test_lesson_1s_runs_in_worker_processes_equal_the_loop():
    """Lesson 1 trains its three runs two at a time in fresh worker processes: the same numbers as a
    loop in this process, run by run, in order."""
    from bertfamily.parallel import in_processes
    from bertfamily.pretraining import HeldOut, masking_run

    g = torch.Generator().manual_seed(0)
    train, test = torch.randint(5, 40, (12, 16), generator=g), torch.randint(5, 40, (6, 16), generator=g)
    small = dict(vocab_size=40, mask_token_id=4, special_ids=[0, 1, 2, 3, 4])
    held = HeldOut.fixed_mask(test, seed=1, **small)
    config = tiny_bert_config(40, hidden=16, layers=1, heads=2, max_positions=16)
    options = dict(steps=4, batch_size=4, lr=3e-3, eval_every=2, progress=False)
    jobs = [
        (name, seed, train, config, small, held, {"held": held}, options)
        for seed in (0, 1)
        for name in ("static", "dynamic")
    ]
    here = in_processes(masking_run, jobs, processes=1, progress=False)
    there = in_processes(masking_run, jobs, processes=2, progress=False)
    assert [r["held"] for r in here] == [r["held"] for r in there]
    assert [r["history"].train_loss for r in here] == [r["history"].train_loss for r in there]
    assert here[0]["history"].train_loss != here[1]["history"].train_loss  # static and dynamic differ
    with pytest.raises(ValueError, match="scheme must be one of"):
        masking_run(("half", 0, train, config, small, held, {}, options))
    with pytest.raises(ValueError, match="processes must be"):
        in_processes(masking_run, jobs, processes=0)
