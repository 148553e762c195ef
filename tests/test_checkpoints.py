"""The committed checkpoints (make pretrain): the stored weights give the logged metrics, and the
start of each run, re-run here, gives the logged curve (bit for bit under the pinned kernels)."""
import pytest
import torch

from bertfamily import checkpoints as ck
from bertfamily import kernels, tlm
from bertfamily.pretraining import evaluate_mlm

#: Where bits cannot match (another CPU), a re-run is compared within this (nats / accuracy).
TOLERANCE = 0.05 if kernels.mode() == "tolerant" else 1e-6


@pytest.fixture(scope="module")
def masking():
    return ck.masking_data(), ck.read_log("masking")


@pytest.fixture(scope="module")
def lexicon():
    return ck.tlm_data(), ck.read_log("tlm")


def test_the_log_holds_every_run_and_its_settings(masking, lexicon):
    log = masking[1]
    assert log["settings"] == ck.MASKING and set(log["runs"]) == set(ck.MASKING["schemes"])
    assert all(len(runs) == len(ck.MASKING["seeds"]) for runs in log["runs"].values())
    assert log["unigram"] == pytest.approx(masking[0].unigram, abs=1e-9)
    assert lexicon[1]["settings"] == ck.TLM
    assert len(lexicon[1]["runs"]) == len(ck.TLM["seeds"]) * len(ck.TLM["objectives"])


@pytest.mark.parametrize("scheme", ck.MASKING["schemes"])
def test_stored_masking_models_give_the_logged_metrics(masking, scheme):
    data, log = masking
    model = ck.load_masking(data, scheme, seed=0)
    logged = log["runs"][scheme][0]
    assert evaluate_mlm(model, data.held_out)["loss"] == pytest.approx(logged["held"]["loss"], abs=1e-4)
    assert evaluate_mlm(model, data.new_mask)["loss"] == pytest.approx(logged["new"]["loss"], abs=1e-4)


@pytest.mark.slow
def test_a_masking_run_reproduces_its_first_evaluation(masking):
    data, log = masking
    torch.set_num_threads(int(kernels.PINNED["OMP_NUM_THREADS"]))  # as make pretrain trained it
    steps = ck.MASKING["eval_every"]
    _, history, _ = ck.train_masking_run(data, "dynamic", 0, steps)
    logged = log["runs"]["dynamic"][0]
    assert history.eval_steps[0] == logged["curve_steps"][0] == steps
    assert history.eval_loss[0] == pytest.approx(logged["curve_loss"][0], abs=TOLERANCE)


def test_stored_tlm_models_give_the_logged_accuracy(lexicon):
    data, log = lexicon
    blanks = tlm.italian_blanks(*data.test, "with")
    content = torch.tensor([int(t) in data.content for t in blanks.target])
    for seed in ck.TLM["stored_seeds"]:
        model = ck.load_tlm(data, "tlm", seed)
        accuracy = float(tlm.blank_accuracy(model, blanks)[content].float().mean())
        assert accuracy == pytest.approx(log["runs"][f"tlm-{seed}"]["content_accuracy"]["with"], abs=1e-6)


@pytest.mark.slow
def test_a_tlm_run_reproduces_its_first_losses(lexicon):
    data, log = lexicon
    s = ck.TLM
    torch.set_num_threads(1)  # train_models trains each model on one thread
    model = tlm.tiny_model(data.tokenizer.get_vocab_size(), seed=0, hidden=s["hidden"], layers=s["layers"],
                           heads=s["heads"])
    losses = tlm.train_pairs(model, *data.train, "tlm", steps=s["steps"], batch_size=s["batch"],
                             probability=s["probability"], generator=torch.Generator().manual_seed(0),
                             progress=False, until=101)
    assert losses[::100] == pytest.approx(log["runs"]["tlm-0"]["loss_curve"][:2], abs=TOLERANCE)
    torch.set_num_threads(int(kernels.PINNED["OMP_NUM_THREADS"]))
