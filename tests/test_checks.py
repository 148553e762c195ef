"""Every check of the DistilBERT exercise, fed right answers, typical wrong answers and wrong kinds.

Expected values are computed here the way a student computes them (from the counts and sizes a
transformers model has), never copied from the checks: a check that cannot fail, or that fails a
right answer, is caught. Tiny stand-in models keep this fast; the full-size run is
tests/test_grading.py, which executes the exercise notebook.
"""

import warnings

import pytest
import torch
import transformers

from bertfamily import budget, checks
from bertfamily.answers import files_checked_elsewhere
from bertfamily.models import published_config

DISTIL_CONFIG = published_config("distilbert-base-uncased")
BERT_CONFIG = published_config("bert-base-uncased")
DISTIL = budget.count(DISTIL_CONFIG)
BERT = budget.count(BERT_CONFIG)
MIB = 2**20


@pytest.fixture(autouse=True)
def _sizes_are_numbers_here():
    """The sizes fed here are numbers, with no file behind them: the checks' look for a saved file (tested in
    tests/test_saved_files.py) is off, as in the grader's process."""
    with files_checked_elsewhere():
        yield


def run(capsys, check, *args):
    """(returned value, printed text) of one check; the check must never raise."""
    ok = check(*args)
    text = capsys.readouterr().out
    assert isinstance(ok, bool)
    assert text.startswith("✓" if ok else "✗"), text
    return ok, text


class _Shell(torch.nn.Module):
    """A weightless stand-in for a transformers model: only its class name and config matter."""

    def __init__(self, config):
        super().__init__()
        self.config = config


def shell(cls_name, config):
    return type(cls_name, (_Shell,), {})(config)


@pytest.fixture(scope="module")
def tiny_distilbert(tiny_config):
    return transformers.DistilBertModel(tiny_config("distilbert", n_layers=DISTIL_CONFIG.n_layers)).eval()


def quantize(model, spec=None, dtype=torch.qint8, inplace=False):
    """torch's quantize_dynamic, its deprecation warnings silenced (they are not under test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, spec or {torch.nn.Linear}, dtype=dtype, inplace=inplace)


# ------------------------------------------------------------------ expected values, independently


def test_expected_counts_match_transformers_models():
    """The checks' expected counts are what parameters() gives on the real architectures."""
    with torch.device("meta"):  # shapes only: no memory, no random init
        distil = transformers.DistilBertModel(DISTIL_CONFIG)
        bert = transformers.BertModel(BERT_CONFIG)
    assert checks.expected_counts() == (
        sum(p.numel() for p in distil.parameters()),
        sum(p.numel() for p in bert.parameters()),
    )


def test_checks_load_what_they_compute_with_at_import():
    """The grader imports checks before any submission runs (grading/verify.py): the modules its
    expected values come from must be loaded by then, not imported lazily while grading."""
    import subprocess
    import sys

    code = "import sys, bertfamily.checks; assert {'bertfamily.budget', 'bertfamily.quantization'} <= set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_distilbert_split_matches_linear_and_embedding_modules():
    with torch.device("meta"):
        distil = transformers.DistilBertModel(DISTIL_CONFIG)
    linears = [m for m in distil.modules() if isinstance(m, torch.nn.Linear)]
    tables = [m for m in distil.modules() if isinstance(m, torch.nn.Embedding)]
    split = checks.distilbert_split()
    assert split["linear layers"] == len(linears)
    assert split["linear weights"] == sum(m.weight.numel() for m in linears)
    assert split["embedding tables"] == sum(m.weight.numel() for m in tables)
    assert split["rows"] == sum(m.num_embeddings for m in tables)


# ------------------------------------------------------------------ task 1


def test_models_right(capsys):
    ok, text = run(
        capsys, checks.check_models, shell("DistilBertModel", DISTIL_CONFIG), shell("BertModel", BERT_CONFIG)
    )
    assert ok


@pytest.mark.parametrize(
    "distil, bert, hint",
    [
        (shell("BertModel", BERT_CONFIG), shell("DistilBertModel", DISTIL_CONFIG), "swapped"),
        (shell("DistilBertForMaskedLM", DISTIL_CONFIG), shell("BertModel", BERT_CONFIG), "task head"),
        (
            shell("DistilBertModel", DISTIL_CONFIG),
            shell("BertModel", published_config("bert-large-uncased")),
            "num_hidden_layers",
        ),
        (
            shell("AlbertModel", published_config("albert-base-v2")),
            shell("BertModel", BERT_CONFIG),
            "model type 'albert'",
        ),
        (None, shell("BertModel", BERT_CONFIG), "still None"),
        ("distilbert-base-uncased", shell("BertModel", BERT_CONFIG), "should be a transformers model"),
    ],
)
def test_models_wrong(capsys, distil, bert, hint):
    ok, text = run(capsys, checks.check_models, distil, bert)
    assert not ok and hint in text


# ------------------------------------------------------------------ task 2


def test_counts_right(capsys):
    ok, text = run(capsys, checks.check_parameter_counts, DISTIL, BERT)
    assert ok and f"{DISTIL:,}" in text


def test_counts_accept_tensor_and_numpy(capsys):
    import numpy as np

    assert run(capsys, checks.check_parameter_counts, torch.tensor(DISTIL), np.int64(BERT))[0]


def test_count_without_pooler_is_recognised(capsys):
    """A BERT count short by the pooler (H^2 + H = 590,592 for H 768)."""
    H = BERT_CONFIG.hidden_size
    ok, text = run(capsys, checks.check_parameter_counts, DISTIL, BERT - (H * H + H))
    assert not ok and "H x H" in text
    assert str(H * H + H) not in text and f"{H * H + H:,}" not in text  # the hint gives no number


def test_state_dict_double_count_is_recognised(capsys):
    """Summing state_dict() of the masked-LM model counts the tied decoder twice."""
    with torch.device("meta"):
        mlm = transformers.BertForMaskedLM(BERT_CONFIG)
    doubled = sum(t.numel() for t in mlm.state_dict().values())
    assert doubled > sum(p.numel() for p in mlm.parameters())
    ok, text = run(capsys, checks.check_parameter_counts, DISTIL, doubled)
    assert not ok and "state_dict()" in text


def test_mlm_model_count_is_recognised(capsys):
    with torch.device("meta"):
        mlm = transformers.DistilBertForMaskedLM(DISTIL_CONFIG)
    ok, text = run(capsys, checks.check_parameter_counts, sum(p.numel() for p in mlm.parameters()), BERT)
    assert not ok and "masked-LM head" in text


@pytest.mark.parametrize(
    "distil, bert, hint",
    [
        (BERT, DISTIL, "swapped"),
        (round(DISTIL / 1e6, 1), BERT, "whole number"),
        (100, BERT, "number of weight tensors"),
        (DISTIL + 1, BERT, "distilbert_count"),
        (None, None, "still None"),
        ("66,362,880", BERT, "not the text"),
        (True, BERT, "should be a whole number"),
        (float("nan"), BERT, "should be a finite number"),  # int(nan) raised ValueError before the hint
        (torch.tensor(float("inf")), BERT, "should be a finite number"),
    ],
)
def test_counts_wrong(capsys, distil, bert, hint):
    ok, text = run(capsys, checks.check_parameter_counts, distil, bert)
    assert not ok and hint in text


def test_placeholder_none_says_no_answer_yet(capsys):
    for check, args in (
        (checks.check_models, (None, None)),
        (checks.check_parameter_counts, (None, None)),
        (checks.check_reduction, (None,)),
        (checks.check_predicted_sizes, (None, None)),
        (checks.check_combined_factor, (None,)),
        (checks.check_file_sizes, (None, None)),
        (checks.check_int8_prediction, (None, None, None)),
        (checks.check_embedding_quantization, (None,)),
        (checks.check_speedup, (None,)),
    ):
        ok, text = run(capsys, check, *args)
        assert not ok and "no answer yet" in text and "still None" in text, text


def test_counts_given_a_model(capsys, tiny_distilbert):
    ok, text = run(capsys, checks.check_parameter_counts, tiny_distilbert, BERT)
    assert not ok and "a model (DistilBertModel)" in text and "Traceback" not in text


# ------------------------------------------------------------------ task 3


def test_reduction_right(capsys):
    ok, text = run(capsys, checks.check_reduction, 1 - DISTIL / BERT)
    assert ok and f"{1 - DISTIL / BERT:.1%}" in text


@pytest.mark.parametrize(
    "value, hint",
    [
        (100 * (1 - DISTIL / BERT), "percentage"),
        (DISTIL / BERT, "keeps"),
        (BERT / DISTIL, "upside down"),
        (BERT / DISTIL - 1, "upside down"),
        (round(1 - DISTIL / BERT, 2), "rounded too early"),
        (0.5, "compare the two counts"),
        (42.0, "looks like a percentage"),
        (None, "still None"),
    ],
)
def test_reduction_wrong(capsys, value, hint):
    ok, text = run(capsys, checks.check_reduction, value)
    assert not ok and hint in text


# ------------------------------------------------------------------ task 4


def test_predicted_sizes_right(capsys):
    assert run(capsys, checks.check_predicted_sizes, DISTIL * 4 / MIB, DISTIL / MIB)[0]


@pytest.mark.parametrize(
    "fp32, int8, hint",
    [
        (DISTIL * 4 / 1e6, DISTIL / 1e6, "MB (10**6 bytes)"),
        (DISTIL * 2 / MIB, DISTIL / MIB, "wrong number of bytes per parameter"),  # fp16
        (DISTIL * 32 / MIB, DISTIL / MIB, "bits, not bytes"),
        (DISTIL / MIB, DISTIL * 4 / MIB, "swapped"),
        (DISTIL * 4 / 1024, DISTIL / MIB, "KiB"),
        (BERT * 4 / MIB, DISTIL / MIB, "BERT-base"),
        (DISTIL * 4 / MIB, DISTIL * 0.5 / MIB, "wrong number of bytes per parameter"),  # 4 bits
        (None, DISTIL / MIB, "still None"),
    ],
)
def test_predicted_sizes_wrong(capsys, fp32, int8, hint):
    ok, text = run(capsys, checks.check_predicted_sizes, fp32, int8)
    assert not ok and hint in text


def test_combined_factor(capsys):
    right = (4 * BERT) / DISTIL
    assert run(capsys, checks.check_combined_factor, right)[0]
    for value, hint in (
        (1 / right, "upside down"),
        (BERT / DISTIL, "distillation alone"),
        (4.0, "quantisation alone"),
        (right / 2, "bytes per parameter"),
        ("6.6x", "not the text"),
    ):
        ok, text = run(capsys, checks.check_combined_factor, value)
        assert not ok and hint in text


# ------------------------------------------------------------------ task 5


def test_quantized_right(capsys, tiny_distilbert):
    ok, text = run(capsys, checks.check_quantized, quantize(tiny_distilbert), tiny_distilbert)
    assert ok and "36" in text


def test_quantized_wrong(capsys, tiny_distilbert, tiny_config):
    cases = [
        (None, tiny_distilbert, "still None"),
        (tiny_distilbert, tiny_distilbert, "fp32 model itself"),
        (quantize(tiny_distilbert, dtype=torch.float16), tiny_distilbert, "float16"),
        (
            quantize(tiny_distilbert, spec={"transformer.layer.0.attention.q_lin"}),
            tiny_distilbert,
            "1 of DistilBERT's linear layers",
        ),
        (quantize(transformers.BertModel(tiny_config(num_hidden_layers=1))), tiny_distilbert, "not DistilBERT"),
        (12, tiny_distilbert, "should be a transformers model"),
    ]
    for model, original, hint in cases:
        ok, text = run(capsys, checks.check_quantized, model, original)
        assert not ok and hint in text, (hint, text)


def test_quantized_in_place_is_recognised(capsys, tiny_config):
    model = transformers.DistilBertModel(tiny_config("distilbert", n_layers=6)).eval()
    same = quantize(model, inplace=True)
    ok, text = run(capsys, checks.check_quantized, same, model)
    assert not ok and "in place" in text


# ------------------------------------------------------------------ task 6

FRAMING = 30_000  # bytes a torch.save file adds to its weights (tens of kB, measured in the notebook)


def weights_bytes():
    split = checks.distilbert_split()
    fp32 = 4 * DISTIL
    int8 = split["linear weights"] + 4 * (DISTIL - split["linear weights"])
    return fp32, int8


def test_file_sizes_right(capsys):
    fp32, int8 = weights_bytes()
    ok, text = run(capsys, checks.check_file_sizes, fp32 + FRAMING, int8 + FRAMING)
    assert ok and "MiB" in text


@pytest.mark.parametrize("scale, hint", [(1 / MIB, "in MiB"), (1e-6, "in MB"), (8, "counts bits")])
def test_file_sizes_units(capsys, scale, hint):
    fp32, int8 = weights_bytes()
    ok, text = run(capsys, checks.check_file_sizes, (fp32 + FRAMING) * scale, (int8 + FRAMING) * scale)
    assert not ok and hint in text


def test_file_sizes_mistakes(capsys):
    fp32, int8 = weights_bytes()
    f, i = fp32 + FRAMING, int8 + FRAMING
    cases = [
        ((i, f), "swapped"),
        ((f, f), "save the quantised model"),
        ((i, i), "quantised in place"),
        ((f, int8 // 2), "smaller than the weights"),
        ((f, 1.1 * i), "os.path.getsize"),
        ((None, i), "still None"),
    ]
    for args, hint in cases:
        ok, text = run(capsys, checks.check_file_sizes, *args)
        assert not ok and hint in text, (hint, text)


# ------------------------------------------------------------------ task 7


def task7_truth():
    split, want = checks.distilbert_split(), checks.predicted_file_bytes()
    kept = split["embedding tables"] + split["other"]
    return split, kept, want["int8"]


def test_int8_prediction_right(capsys):
    split, kept, int8 = task7_truth()
    assert kept == checks.kept_in_fp32() and kept * 4 + split["linear weights"] == int8
    ok, out = run(capsys, checks.check_int8_prediction, kept, int8, int8 + FRAMING)
    assert ok and f"{kept:,} parameters stay fp32" in out


@pytest.mark.parametrize(
    "case, hint",
    [
        ("tables only", "two smaller kinds of parameter"),
        ("biases only", "which large tables are not nn.Linear"),
        ("converted", "what quantize_dynamic converted"),
        ("all 8-bit", "task 4's 8-bit size"),
        ("in MiB", "in MiB"),
        ("the file itself", "the measured size itself"),
        ("another file", "not the int8 file of task 6"),
    ],
)
def test_int8_prediction_wrong(capsys, case, hint):
    """Every wrong explanation the keyword check let through has a number: wrong numbers fail."""
    split, kept, int8 = task7_truth()
    measured = int8 + FRAMING
    args = {
        "tables only": (split["embedding tables"], int8, measured),
        "biases only": (split["other"], int8, measured),
        "converted": (split["linear weights"], int8, measured),
        "all 8-bit": (kept, kept + split["linear weights"], measured),
        "in MiB": (kept, int8 / 2**20, measured),
        "the file itself": (kept, measured, measured),
        "another file": (kept, int8, checks.predicted_file_bytes()["fp32"] + FRAMING),
    }[case]
    ok, out = run(capsys, checks.check_int8_prediction, *args)
    assert not ok and hint in out, out


def test_a_predicted_size_is_not_a_measured_file(capsys):
    """A file holds torch.save's framing on top of its weights: the prediction to the byte is not it."""
    want = checks.predicted_file_bytes()
    ok, out = run(capsys, checks.check_file_sizes, want["fp32"], want["int8"])
    assert not ok and "predicted from the counts, to the byte" in out
    ok, out = run(capsys, checks.check_embedding_quantization, want["int8 + embeddings"])
    assert not ok and "to the byte" in out


def test_the_sentence_is_for_the_instructor_and_never_scored(capsys):
    for text in ("The embeddings stay in fp32.", "The file is 16-bit embeddings.", None):
        assert checks.for_the_instructor(text) is None
    out = capsys.readouterr().out
    assert "✓" not in out and "✗" not in out and "for your instructor, not scored: The embeddings" in out


# ------------------------------------------------------------------ stretch


def test_embedding_quantization(capsys):
    split = checks.distilbert_split()
    both = split["linear weights"] + split["embedding tables"] + 8 * split["rows"] + 4 * split["other"]
    assert run(capsys, checks.check_embedding_quantization, both + FRAMING)[0]
    _, int8 = weights_bytes()
    for value, hint in (
        (int8 + FRAMING, "linear layers only"),
        ((both + FRAMING) / MIB, "in MiB"),
        (both // 2, "smaller than"),
        (None, "still None"),
    ):
        ok, text = run(capsys, checks.check_embedding_quantization, value)
        assert not ok and hint in text


def test_speedup(capsys):
    assert run(capsys, checks.check_speedup, 2.4)[0]
    for value, hint in ((0.4, "upside down"), (150.0, "implausibly"), (-1, "not a speed ratio"), (None, "still None")):
        ok, text = run(capsys, checks.check_speedup, value)
        assert not ok and hint in text


# ------------------------------------------------------------------ task 10: a model whose word table dominates


def test_multilingual(capsys):
    """Counted as a student counts: the model built (on the meta device: no memory), its nn.Linear weights
    at one byte and everything else at four, plus torch.save's framing."""
    config = published_config("distilbert-base-multilingual-cased")
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(config)
    count = sum(p.numel() for p in model.parameters())
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    size = linear + 4 * (count - linear) + FRAMING
    saving = 1 - size / (4 * count)
    ok, text = run(capsys, checks.check_multilingual, count, size, saving)
    assert ok and f"save {saving:.0%} of multilingual DistilBERT" in text
    distil_saving = 1 - checks.predicted_file_bytes()["int8"] / checks.predicted_file_bytes()["fp32"]
    assert saving < distil_saving / 1.5  # the point of the task: the word table stays 32-bit
    for args, hint in (
        ((DISTIL, size, saving), "DistilBERT's count"),
        ((count, 4 * count + FRAMING, 0.0), "as big as the fp32"),
        ((count, size / MIB, saving), "in MiB"),
        ((count, size, 100 * saving), "in percent"),
        ((count, size, 1 - saving), "keeps"),
        ((count, size, 4 * count / size), "ratio of sizes"),
        ((None, size, saving), "still None"),
        ((count, "412 MB", saving), "keep the number"),
    ):
        ok, text = run(capsys, checks.check_multilingual, *args)
        assert not ok and hint in text, (args, text)
