"""The XLM lesson's experiment helpers (bertfamily.tlm), on tiny configs: each test runs in seconds."""

import subprocess
import sys

import pytest
import torch

from bertfamily import pairs, parallel, tlm
from bertfamily.data import aligned_pairs
from bertfamily.pretraining import tiny_bert, tiny_bert_config


def tiny_model(vocab, seed=0, layers=1, eager=False):  # sdpa unless eager
    config = tiny_bert_config(vocab, hidden=32, layers=layers, heads=2, max_positions=32, type_vocab_size=2)
    if eager:
        config._attn_implementation = "eager"
    return tiny_bert(config, seed)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def corpus():
    train, test = pairs.split_pairs(aligned_pairs("it"))
    tokenizer = pairs.train_tokenizer([s for p in train for s in p], vocab_size=300)
    return train, test, tokenizer


def test_tokenizer_special_ids_and_one_vocabulary(corpus):
    _, _, tokenizer = corpus
    for i, name in enumerate(pairs.SPECIAL_TOKENS):
        assert tokenizer.token_to_id(name) == i
    assert tokenizer.get_vocab_size() <= 300
    # English and Italian words come out of the same table, accents kept, lower-cased
    ids = tokenizer.encode("Python è", add_special_tokens=False)
    assert tokenizer.decode(ids.ids) == "python è"


@pytest.mark.parametrize("size", [0, 5, 2.5])
def test_tokenizer_bad_size(size):
    with pytest.raises(ValueError, match="vocab_size must be an integer above 5"):
        pairs.train_tokenizer(["a b c"], vocab_size=size)


def test_tokenizer_is_deterministic_and_needs_room_for_the_alphabet():
    texts = ["the intelligence", "l'intelligenza", "artificial", "artificiale"] * 3
    a, b = pairs.train_tokenizer(texts, vocab_size=60), pairs.train_tokenizer(list(reversed(texts)), vocab_size=60)
    assert a.get_vocab() == b.get_vocab()
    assert "intelligen" in a.get_vocab()  # a piece the two languages share
    with pytest.raises(ValueError, match="below the .* special tokens and characters"):
        pairs.train_tokenizer(texts, vocab_size=10)


def test_tokenizer_needs_text():
    with pytest.raises(ValueError, match="texts is empty"):
        pairs.train_tokenizer(["", "  "])


def test_split_shares_no_sentence(corpus):
    train, test, _ = corpus
    assert len(train) > 4 * len(test) > 0
    assert not {a for a, _ in train} & {a for a, _ in test}
    assert not {b for _, b in train} & {b for _, b in test}
    assert pairs.split_pairs(aligned_pairs("it")) == (train, test)
    assert pairs.split_pairs(aligned_pairs("it"), seed=1)[1] != test


def test_split_bad_input():
    with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\)"):
        pairs.split_pairs([("a", "b"), ("c", "d")], test_fraction=1.0)
    with pytest.raises(ValueError, match="non-empty strings"):
        pairs.split_pairs([("a", ""), ("c", "d")])


def test_keep_short():
    first, second = pairs.keep_short([[5, 6], [5] * 10, [7]], [[8], [9], [9] * 3], max_tokens=4)
    assert first == [[5, 6], [7]] and second == [[8], [9] * 3]
    with pytest.raises(ValueError, match="same number"):
        pairs.keep_short([[5]], [[6], [7]])
    with pytest.raises(ValueError, match="no pair has at most 2 tokens"):
        pairs.keep_short([[5, 6]], [[7]], max_tokens=2)


def test_monolingual_inputs_layout():
    out = pairs.monolingual_inputs([[7, 8, 9], [10]], [0, 1])
    cls, sep, pad = pairs.CLS, pairs.SEP, pairs.PAD
    assert out["input_ids"].tolist() == [[cls, 7, 8, 9, sep], [cls, 10, sep, pad, pad]]
    assert out["attention_mask"].tolist() == [[1] * 5, [1, 1, 1, 0, 0]]
    assert out["language_ids"].tolist() == [[0] * 5, [1] * 5]
    assert out["position_ids"].tolist() == [[0, 1, 2, 3, 4], [0, 1, 2, 0, 0]]
    assert out["special_mask"].tolist() == [[True, False, False, False, True], [True, False, True, True, True]]
    with pytest.raises(ValueError, match="one language id per sentence"):
        pairs.monolingual_inputs([[7]], [0, 1])
    with pytest.raises(ValueError, match="non-empty lists"):
        pairs.monolingual_inputs([[7], []], [0, 1])


def test_training_batch_packs_the_same_text_two_ways():
    first, second = [[5, 6], [7], [8, 9, 10]], [[11], [12, 13], [14]]
    tlm_batch = tlm.training_batch(first, second, [0, 2], "tlm")
    mlm_batch = tlm.training_batch(first, second, [0, 2], "mlm")
    assert tlm_batch["input_ids"].shape[0] == 2 and mlm_batch["input_ids"].shape[0] == 4

    def text(b):
        return sorted(t for t in b["input_ids"].flatten().tolist() if t >= len(pairs.SPECIAL_TOKENS))

    assert text(tlm_batch) == text(mlm_batch) == [5, 6, 8, 9, 10, 11, 14]
    assert mlm_batch["language_ids"][:, 0].tolist() == [0, 0, 1, 1]
    with pytest.raises(ValueError, match=r"objective must be one of \('mlm', 'tlm'\)"):
        tlm.training_batch(first, second, [0], "clm")


def test_blanks_mask_each_second_side_token_once():
    first, second = [[5, 6, 7], [8, 9]], [[7, pairs.UNK, 10], [11]]
    with_en = tlm.italian_blanks(first, second, "with")
    alone = tlm.italian_blanks(first, second, "without")
    wrong = tlm.italian_blanks(first, second, "mismatched")
    for blanks in (with_en, alone, wrong):
        assert len(blanks) == 3  # [UNK] is not a blank
        ids, labels = blanks.inputs["input_ids"], blanks.labels
        assert ((ids == pairs.MASK).sum(1) == 1).all() and ((labels != -100).sum(1) == 1).all()
        blank = ids == pairs.MASK
        assert (blanks.inputs["language_ids"][blank] == 1).all()  # always on the second side
        assert labels[blank].tolist() == blanks.target.tolist() == [7, 10, 11]
    assert with_en.in_first.tolist() == [True, False, False]
    cls, sep, mask, unk = pairs.CLS, pairs.SEP, pairs.MASK, pairs.UNK
    assert with_en.inputs["input_ids"][0].tolist() == [cls, 5, 6, 7, sep, mask, unk, 10, sep]
    assert alone.inputs["input_ids"][0, :5].tolist() == [pairs.CLS, pairs.MASK, pairs.UNK, 10, pairs.SEP]
    assert wrong.inputs["input_ids"][0, :4].tolist() == [pairs.CLS, 8, 9, pairs.SEP]  # the other pair's English
    with pytest.raises(ValueError, match=r"condition must be one of \('with', 'without', 'mismatched'\)"):
        tlm.italian_blanks(first, second, "both")
    with pytest.raises(ValueError, match="same, non-zero number"):
        tlm.italian_blanks(first, second[:1], "with")
    with pytest.raises(ValueError, match="at least two pairs"):
        tlm.italian_blanks(first[:1], second[:1], "mismatched")


def test_predictions_on_some_rows_are_those_rows_of_all():
    """Lesson 6 guesses only the rows hiding a lexicon word: the same guesses, without the rest."""
    first, second = [[5, 6, 7], [8, 9], [6, 5]], [[7, 10, 11], [11], [9, 10]]
    blanks = tlm.italian_blanks(first, second, "with")
    model = tiny_model(12).eval()
    every = tlm.blank_predictions(model, blanks)
    keep = torch.tensor([True, False, True, False, True, True])[: len(blanks)]
    assert torch.equal(tlm.blank_predictions(model, blanks, rows=keep), every[keep])
    assert torch.equal(tlm.blank_predictions(model, blanks, rows=torch.tensor([2, 0])), every[[2, 0]])


def test_train_pairs_is_deterministic_and_checks_input():
    first, second = [[5, 6, 7]] * 8, [[8, 9]] * 8
    runs = []
    for _ in range(2):
        model = tiny_model(12)
        runs.append(
            tlm.train_pairs(
                model,
                first,
                second,
                "tlm",
                steps=5,
                batch_size=4,
                generator=torch.Generator().manual_seed(0),
                progress=False,
            )
        )
    assert runs[0] == runs[1] and len(runs[0]) == 5
    with pytest.raises(ValueError, match="batch_size must be between 1 and the 8 pairs"):
        tlm.train_pairs(tiny_model(12), first, second, "tlm", steps=1, batch_size=9)
    with pytest.raises(ValueError, match="same, non-zero number"):
        tlm.train_pairs(tiny_model(12), first, second[:3], "mlm", steps=1)
    with pytest.raises(ValueError, match="objective must be one of"):
        tlm.train_pairs(tiny_model(12), first, second, "nsp", steps=1, batch_size=4)


def test_the_laid_out_pairs_serve_the_batches_training_batch_builds():
    g = torch.Generator().manual_seed(0)
    first = [torch.randint(5, 30, (int(n),), generator=g).tolist() for n in torch.randint(1, 9, (12,), generator=g)]
    second = [torch.randint(5, 30, (int(n),), generator=g).tolist() for n in torch.randint(1, 9, (12,), generator=g)]
    serve = tlm.laid_out(first, second)
    for objective in tlm.OBJECTIVES:
        for rows in ([0], [3, 1, 7], list(range(12)), [11, 2, 2]):
            built = tlm.training_batch(first, second, rows, objective)
            served = serve(torch.tensor(rows), objective)
            assert served.keys() == built.keys()
            assert all(torch.equal(served[k], built[k]) for k in built), (objective, rows)


def test_alternating_objective_takes_mlm_and_tlm_steps_in_turn(monkeypatch):
    """XLM's recipe: step 1 packs each sentence alone, step 2 the pair together, and so on."""
    first, second = [[5, 6, 7]] * 8, [[8, 9]] * 8
    layouts, real = [], tlm.laid_out

    def recorded(*args):
        serve = real(*args)
        return lambda rows, objective: layouts.append(objective) or serve(rows, objective)

    monkeypatch.setattr(tlm, "laid_out", recorded)
    losses = tlm.train_pairs(
        tiny_model(12),
        first,
        second,
        tlm.ALTERNATING,
        steps=5,
        batch_size=4,
        generator=torch.Generator().manual_seed(0),
        progress=False,
    )
    assert layouts == ["mlm", "tlm", "mlm", "tlm", "mlm"] and len(losses) == 5
    assert tlm.ALTERNATING in tlm.TRAINING_OBJECTIVES and tlm.ALTERNATING not in tlm.OBJECTIVES


def test_tlm_learns_to_read_the_other_side_and_mlm_cannot():
    """A toy 'translation': the second sentence is a random-token copy of the first, one vocabulary
    shifted by a fixed offset. Its blanks are unguessable alone; TLM must learn to consult the
    first side, MLM never sees it. The gap is the lesson's claim in miniature."""
    g = torch.Generator().manual_seed(0)
    words, offset = 10, 10
    first = [(torch.randint(words, (4,), generator=g) + 5).tolist() for _ in range(160)]
    second = [[t + offset for t in s] for s in first]
    vocab = 5 + 2 * words
    scores = {}
    for objective in tlm.OBJECTIVES:
        model = tiny_model(vocab, layers=1)
        tlm.train_pairs(
            model,
            first[:128],
            second[:128],
            objective,
            steps=300,
            batch_size=32,
            lr=5e-3,
            probability=0.3,
            generator=torch.Generator().manual_seed(1),
            progress=False,
        )
        scores[objective] = {
            c: tlm.blank_accuracy(model, tlm.italian_blanks(first[128:], second[128:], c)).float().mean().item()
            for c in ("with", "without")
        }
    assert scores["tlm"]["with"] > 0.8, scores
    assert scores["tlm"]["without"] < 0.3 and scores["mlm"]["with"] < 0.3, scores


def test_attention_to_first_shares():
    first, second = [[5, 6, 7], [8, 9]], [[7, 10], [11]]
    blanks = tlm.italian_blanks(first, second, "with")
    shares = tlm.attention_to_first(tiny_model(12, layers=2, eager=True), blanks)
    assert shares.shape == (2, 2) and ((shares >= 0) & (shares <= 1)).all()
    assert (shares[:, 1] <= shares[:, 0]).all()  # the copies are some of the English words
    with pytest.raises(ValueError, match="no first sentence"):
        tlm.attention_to_first(tiny_model(12, eager=True), tlm.italian_blanks(first, second, "without"))


def test_blank_attention_rows_are_distributions():
    first, second = [[5, 6, 7], [8, 9]], [[7, 10], [11]]
    blanks = tlm.italian_blanks(first, second, "with")
    model = tlm.tiny_model(12, max_positions=16)
    weights, token_ids, where = tlm.blank_attention(model, blanks, pair=0)
    assert weights.shape == (2, 8) and torch.allclose(weights.sum(1), torch.ones(2))
    assert token_ids.tolist() == [pairs.CLS, 5, 6, 7, pairs.SEP, 7, 10, pairs.SEP]  # blanks put back
    assert where.tolist() == [5, 6]
    with pytest.raises(ValueError, match="pair 5 has no blanks"):
        tlm.blank_attention(model, blanks, pair=5)


def test_train_models_in_processes_equals_the_serial_loop(one_thread):
    first, second = [[5, 6, 7], [6, 7, 5, 8]] * 4, [[8, 9], [9, 10, 11]] * 4
    jobs = [("mlm", 0), ("tlm", 0), ("tlm", 1)]
    kw = dict(steps=4, batch_size=4, model_kw={"max_positions": 16}, progress=False)
    parallel_models, parallel = tlm.train_models(12, first, second, jobs, processes=2, **kw)
    serial_models, serial = tlm.train_models(12, first, second, jobs, processes=1, **kw)
    assert parallel == serial and set(parallel) == set(jobs)
    for job in jobs:  # the same weights, bit for bit, and the same as one call of train_pairs
        for a, b in zip(parallel_models[job].parameters(), serial_models[job].parameters(), strict=True):
            assert torch.equal(a, b)
    model = tlm.tiny_model(12, seed=1, max_positions=16)  # one thread, as in the workers
    direct = tlm.train_pairs(
        model, first, second, "tlm", steps=4, batch_size=4, generator=torch.Generator().manual_seed(1), progress=False
    )
    assert direct == serial["tlm", 1]
    assert not parallel_models["mlm", 0].training
    with pytest.raises(ValueError, match="distinct"):
        tlm.train_models(12, first, second, [("mlm", 0), ("mlm", 0)], **kw)
    with pytest.raises(ValueError, match="objective"):
        tlm.train_models(12, first, second, [("nsp", 0)], **kw)
    with pytest.raises(ValueError, match="processes"):
        tlm.train_models(12, first, second, jobs, processes=0, **kw)


def test_train_models_workers_are_not_forks_of_the_caller():
    # Issue 31: lesson 6's first cell asks torch.cuda.is_available(), which initialises the CUDA
    # driver where a GPU is visible, and a forked child cannot use it ("CUDA error: initialization
    # error"). The stand-in for such state, with no GPU: a hook that ends every child forked from the
    # caller. Workers forked from the caller die (BrokenProcessPool); fresh interpreters do not.
    # What it proves: no worker inherits the caller's memory, so nothing the caller initialised
    # (CUDA, thread pools, locks) reaches them. What it cannot: that CUDA itself works in a worker.
    # train_models (lesson 6) and lesson 1's runs start their workers with in_processes, tried here on
    # a function that needs no import, so that the workers start in a second rather than in ten.
    code = (
        "import os\n"
        "from bertfamily.parallel import in_processes\n"
        "os.register_at_fork(after_in_child=lambda: os._exit(17))\n"
        "print(in_processes(abs, [-1, -2, -3], processes=2, progress=False))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[1, 2, 3]" in done.stdout
    assert parallel.START_METHOD != "fork"
    forked = code.replace(
        "from bertfamily.parallel import in_processes",
        "from bertfamily import parallel\nparallel.START_METHOD = 'fork'\nin_processes = parallel.in_processes",
    )
    done = subprocess.run([sys.executable, "-c", forked], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "BrokenProcessPool" in done.stderr, "the hook must end forked workers"
