"""bertfamily.quantization on a tiny 2-layer BERT: sizes as predicted, an independent copy, timings.

No timing is compared: a latency is checked to be a positive, finite number of seconds.
"""

import importlib.metadata
import math
import os
import subprocess
import sys
import warnings

import pytest
import torch
from torch import nn
from transformers import BertModel

from bertfamily import budget, models, timing, unpinned
from bertfamily import quantization as q


@pytest.fixture(scope="module")
def bert(tiny_config):
    torch.manual_seed(0)
    return BertModel(tiny_config()).eval()


@pytest.fixture(scope="module")
def inputs(bert):
    return {"input_ids": torch.randint(0, bert.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))}


def overhead_bound(model):
    """Generous bound on what torch.save adds beyond the raw tensor bytes: framing per tensor."""
    return 2048 + 1024 * len(model.state_dict())


def test_linear_layers_become_int8_embeddings_stay(bert):
    quantized = q.quantize_linear(bert)
    kinds = {type(m) for m in quantized.modules()}
    assert nn.Linear not in kinds and torch.ao.nn.quantized.dynamic.Linear in kinds
    assert nn.Embedding in kinds  # untouched without embeddings=True
    with_tables = q.quantize_linear(bert, embeddings=True)
    kinds = {type(m) for m in with_tables.modules()}
    assert nn.Embedding not in kinds and q.ContiguousQuantizedEmbedding in kinds


def test_the_input_is_untouched_and_the_copy_independent(bert):
    before = {k: v.clone() for k, v in bert.state_dict().items()}
    quantized = q.quantize_linear(bert, embeddings=True)
    assert quantized is not bert
    assert all(type(m) is not nn.Linear for m in quantized.modules())
    assert sum(isinstance(m, nn.Linear) for m in bert.modules()) == 2 * 6 + 1  # still fp32
    for name, tensor in bert.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    # the copy's surviving fp32 tensors are separate storage: changing them leaves the original alone
    quantized.embeddings.LayerNorm.weight.data.fill_(3.0)
    assert torch.equal(bert.embeddings.LayerNorm.weight, before["embeddings.LayerNorm.weight"])


@pytest.mark.parametrize("embeddings", [False, True])
def test_int8_model_computes_nearly_the_same(bert, inputs, embeddings):
    """Runs without token_type_ids (BERT's default is a strided view: the contiguity fix)."""
    quantized = q.quantize_linear(bert, embeddings=embeddings)
    with torch.inference_mode():
        ref = bert(**inputs).last_hidden_state
        got = quantized(**inputs).last_hidden_state
    cos = torch.nn.functional.cosine_similarity(ref.flatten(1), got.flatten(1))
    assert cos.min() > 0.99
    assert not torch.equal(ref, got)  # it did quantise something


def test_per_channel_keeps_one_scale_per_row(bert, inputs):
    quantized = q.quantize_linear(bert, per_channel=True)
    weight = quantized.pooler.dense.weight()
    assert weight.qscheme() == torch.per_channel_affine
    assert weight.q_per_channel_scales().numel() == bert.pooler.dense.out_features
    assert q.quantize_linear(bert).pooler.dense.weight().qscheme() == torch.per_tensor_affine
    with torch.inference_mode():
        ref = bert(**inputs).last_hidden_state
        got = quantized(**inputs).last_hidden_state
    assert torch.nn.functional.cosine_similarity(ref.flatten(1), got.flatten(1)).min() > 0.99


def test_sizes_shrink_as_predicted(bert):
    fp32 = q.serialized_bytes(bert)
    linear = q.quantize_linear(bert)
    tables = q.quantize_linear(bert, embeddings=True)
    sizes = {"fp32": fp32, "linear": q.serialized_bytes(linear), "tables": q.serialized_bytes(tables)}
    predicted = {
        "fp32": q.predicted_bytes(bert.config),
        "linear": q.predicted_bytes(bert.config, linear_bits=8),
        "tables": q.predicted_bytes(bert.config, linear_bits=8, embedding_bits=8),
    }
    assert predicted["fp32"] == budget.to_bytes(budget.count(bert.config), 32)
    assert sizes["fp32"] > sizes["linear"] > sizes["tables"]
    for model, key in ((bert, "fp32"), (linear, "linear"), (tables, "tables")):
        extra = sizes[key] - predicted[key]
        assert 0 <= extra < overhead_bound(model), (key, sizes[key], predicted[key])
    # the saving is 3 bytes per quantised weight, give or take the framing
    split = q.linear_split(bert.config)
    saved = sizes["fp32"] - sizes["linear"]
    assert abs(saved - 3 * split["linear weights"]) < overhead_bound(bert)


def test_file_and_buffer_agree(bert, tmp_path):
    quantized = q.quantize_linear(bert)
    path = tmp_path / "model.pt"
    on_disk = q.serialized_bytes(quantized, path)
    assert path.stat().st_size == on_disk
    in_memory = q.serialized_bytes(quantized)
    assert abs(on_disk - in_memory) < 100 * len(quantized.state_dict())
    assert q.serialized_bytes(quantized.state_dict()) == in_memory
    assert q.serialized_mib(quantized) == pytest.approx(in_memory / 2**20)


@pytest.mark.parametrize(
    "kind", ["bert", "distilbert", "albert-base-v2", "distilbert-base-uncased", "bert-base-uncased"]
)
def test_linear_split_matches_the_modules(kind, tiny_config):
    config = tiny_config(kind) if kind in ("bert", "distilbert") else models.published_config(kind)
    with torch.device("meta"):
        model = models.transformers.AutoModel.from_config(config)
    split = q.linear_split(config)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    tables = [m for m in model.modules() if isinstance(m, nn.Embedding)]
    assert split["linear weights"] == sum(m.weight.numel() for m in linears)
    assert split["linear biases"] == sum(m.bias.numel() for m in linears)
    assert split["embeddings"] == sum(m.weight.numel() for m in tables)
    assert sum(split.values()) == budget.count(config) == models.count_parameters(model)


def test_distilbert_prediction_is_the_lessons_arithmetic():
    config = models.published_config("distilbert-base-uncased")
    split = q.linear_split(config)
    assert split["linear weights"] == 42_467_328 and split["embeddings"] == 23_834_112
    assert q.predicted_bytes(config) == 4 * 66_362_880
    assert q.predicted_bytes(config, linear_bits=8) == 4 * 66_362_880 - 3 * 42_467_328


def test_no_deprecation_warnings_escape(bert):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quantized = q.quantize_linear(bert, embeddings=True)
        q.serialized_bytes(quantized)


def test_other_warnings_are_not_silenced(bert, monkeypatch):
    real = q.quantize_dynamic

    def noisy(*args, **kwargs):
        warnings.warn("something else went wrong", UserWarning, stacklevel=2)
        return real(*args, **kwargs)

    monkeypatch.setattr(q, "quantize_dynamic", noisy)
    with pytest.warns(UserWarning, match="something else"):
        q.quantize_linear(bert)


def test_latency_is_positive(bert, inputs):
    seconds = timing.latency(bert, inputs, warmup=1, runs=3)
    assert isinstance(seconds, float) and math.isfinite(seconds) and seconds > 0
    assert timing.latency(bert, (inputs["input_ids"],), warmup=0, runs=1) > 0
    assert timing.latency(bert, inputs["input_ids"], warmup=0, runs=1) > 0


class Recorder(nn.Module):
    def __init__(self, name, log):
        super().__init__()
        self.name, self.log = name, log

    def forward(self, x):
        self.log.append(self.name)
        return x


def test_compare_latency_interleaves_and_reports_ratios(bert, inputs):
    log = []
    result = timing.compare_latency(
        {"a": Recorder("a", log), "b": Recorder("b", log)}, torch.zeros(1), warmup=1, runs=3
    )
    assert log == ["a", "b"] + ["a", "b"] * 3  # warm-up each, then timed in turn
    assert set(result["seconds"]) == {"a", "b"} and result["baseline"] == "a"
    assert all(len(ts) == 3 for ts in result["times"].values())

    result = timing.compare_latency(
        {"bert": bert, "int8": q.quantize_linear(bert)}, inputs, warmup=1, runs=3, baseline="int8"
    )
    assert all(math.isfinite(s) and s > 0 for s in result["seconds"].values())
    assert result["speedup"]["int8"] == 1.0
    assert result["speedup"]["bert"] == pytest.approx(result["seconds"]["int8"] / result["seconds"]["bert"])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: q.quantize_linear("not a model"), "torch.nn.Module"),
        (lambda m: q.quantize_linear(m, embeddings="yes"), "True or False"),
        (lambda m: q.quantize_linear(m, per_channel=1), "per_channel must be True or False"),
        (lambda m: q.serialized_bytes([1, 2, 3]), "state_dict"),
        (lambda m: q.predicted_bytes(m.config, linear_bits=4), "8 .int8. or 32"),
        (lambda m: timing.latency(m, None, warmup=-1), "warmup must be"),
        (lambda m: timing.latency(m, None, runs=0), "runs must be"),
        (lambda m: timing.compare_latency({}, None), "non-empty dict"),
        (lambda m: timing.compare_latency([m], None), "non-empty dict"),
        (lambda m: timing.compare_latency({"a": m, "b": 3}, None), "models\\['b'\\]"),
        (lambda m: timing.compare_latency({"a": m}, None, baseline="z"), "baseline must be one of"),
        (lambda m: q.linear_split(object()), "budget knows model types"),
    ],
)
def test_bad_input_says_what_is_allowed(bert, call, message):
    with pytest.raises(ValueError, match=message):
        call(bert)


def test_size_calculator_reproduces_the_lesson():
    distil = q.size_calculator()  # DistilBERT's shape at 8 bits
    assert distil["parameters"] == 66_362_880
    assert distil["mib"] == pytest.approx(63.29, abs=0.01)
    assert distil["factor"] == pytest.approx(4 * 109_482_240 / 66_362_880)
    bert = q.size_calculator(layers=12, bits=32, layout="bert")
    assert bert["parameters"] == 109_482_240 and bert["factor"] == 1.0
    assert q.size_calculator(layers=3)["parameters"] < distil["parameters"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(layers=0), "layers must be"),
        (dict(hidden=100), "multiple of 64"),
        (dict(vocab=2.5), "vocab must be"),
        (dict(bits=3), "bits must be one of"),
        (dict(layout="albert"), "layout must be"),
    ],
)
def test_size_calculator_refuses_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        q.size_calculator(**kwargs)


# ------------------------------------------------------------------ torchao, and a torch without torch.ao.quantization


@pytest.mark.parametrize("kw", [{}, {"per_channel": True}, {"embeddings": True}])
def test_torchao_gives_the_same_int8(bert, inputs, kw):
    eager, ao = q.quantize_linear(bert, **kw), q.quantize_torchao(bert, **kw)
    assert eager.quantized_with == q.EAGER and ao.quantized_with == q.TORCHAO
    assert sum(isinstance(m, nn.Linear) for m in bert.modules()) == 2 * 6 + 1  # the input stays fp32
    with torch.inference_mode():
        ref, a, b = (m(**inputs).last_hidden_state for m in (bert, eager, ao))
    cos = torch.nn.functional.cosine_similarity
    assert cos(ref.flatten(1), b.flatten(1)).min() > 0.999 and cos(a.flatten(1), b.flatten(1)).min() > 0.999
    assert q.serialized_bytes(ao) < q.serialized_bytes(bert)  # (scales differ: fp64 in eager, fp32 in torchao)
    if kw.get("embeddings"):
        assert type(ao.embeddings.word_embeddings.weight).__name__ == "IntxUnpackedToInt8Tensor"


GONE = """
import sys, warnings
import torch
import torch.ao.quantization
from transformers import BertConfig, BertModel  # transformers imports torchao, which uses torch.ao.quantization
# as if this torch had no eager-mode quantisation: its quantised modules and quantize_dynamic are gone
gone = [m for m in sys.modules if m.startswith("torch.ao.nn.quantized")] + ["torch.ao.nn.quantized"]
for name in gone + sys.argv[1:]:
    sys.modules[name] = None  # importing it fails
for module in (torch.ao.quantization, torch.quantization):
    module.__dict__.pop("quantize_dynamic", None)
from bertfamily import checks, quantization as q  # the grader imports checks, which imports quantization
model = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=64)).eval()
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    try:
        int8 = q.quantize_linear(model, embeddings=True)
    except ImportError as error:
        print("ImportError:", error)
        raise SystemExit(0)
print(int8.quantized_with, "|", [str(w.message) for w in said])
ids = torch.randint(0, 50, (2, 8))
print(torch.nn.functional.cosine_similarity(model(ids).last_hidden_state.flatten(1),
                                            int8(ids).last_hidden_state.flatten(1)).min().item() > 0.99,
      q.serialized_bytes(int8) < q.serialized_bytes(model))
"""


@pytest.mark.slow  # two fresh interpreters that import transformers and torchao
def test_without_torch_ao_quantization_torchao_does_it_and_says_so():
    done = subprocess.run([sys.executable, "-c", GONE], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    path, said, works = done.stdout.strip().splitlines()[-2].partition(" | ")[0], done.stdout, done.stdout.split()[-2:]
    assert path == q.TORCHAO and "has no torch.ao.quantization: quantised with torchao" in said
    assert works == ["True", "True"]
    # and with torchao missing too, the error says what to install
    done = subprocess.run(
        [sys.executable, "-c", GONE, "torchao", "torchao.quantization"], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0 and "needs the package torchao (`pip install 'torchao>=0.18'`)" in done.stdout, (
        done.stderr
    )


# ------------------------------------------------------------------ which torchao: the installed one, or Colab's 0.10.0


@pytest.mark.parametrize(
    "version, usable",
    [
        ("0.18.0", True),
        ("0.19.1+cpu", True),
        ("1.2.0", True),
        ("0.18.0.dev20260801", True),
        ("0.10.0", False),
        ("0.17.9", False),
        (None, False),
    ],
)
def test_the_torchao_path_needs_min_torchao_and_says_which_it_takes(monkeypatch, version, usable):
    monkeypatch.setattr(q, "torchao_version", lambda: version)
    assert q.torchao_usable() is usable and q.MIN_TORCHAO == "0.18"
    sentence = q.torchao_path()
    if usable:
        assert sentence == f"torchao 0.18 or newer is installed: quantize_torchao quantises with torchao ({q.TORCHAO})."
    else:
        assert q.EAGER in sentence and "falls back" in sentence
        assert ("not installed" if version is None else f"torchao {version} is older than 0.18") in sentence


def test_the_installed_torchao_is_read_without_importing_it():
    assert q.torchao_version() == importlib.metadata.version("torchao")
    assert q.torchao_usable(), "make test's environment has the torchao of the committed outputs (the test extra)"
    assert q.torchao_path().startswith("torchao 0.18 or newer is installed")


@pytest.mark.parametrize("kw", [{}, {"embeddings": True}, {"per_channel": True}])
def test_an_older_torchao_falls_back_to_quantize_dynamic_and_says_so(bert, inputs, monkeypatch, kw):
    monkeypatch.setattr(q, "torchao_version", lambda: "0.10.0")  # Colab's
    with pytest.warns(UserWarning, match=r"torchao 0\.10\.0 is older than 0\.18.*falls back"):
        fallback = q.quantize_torchao(bert, **kw)
    eager = q.quantize_linear(bert, **kw)
    assert fallback.quantized_with == q.EAGER and fallback is not bert
    with torch.inference_mode():
        assert torch.equal(fallback(**inputs).last_hidden_state, eager(**inputs).last_hidden_state)
    assert q.serialized_bytes(fallback) == q.serialized_bytes(eager)


def test_without_any_int8_path_the_error_says_what_to_install(bert, monkeypatch):
    monkeypatch.setattr(q, "torchao_version", lambda: "0.10.0")
    monkeypatch.setattr(q, "quantize_dynamic", None)
    assert "no int8 path here" in q.torchao_path()
    with pytest.raises(ImportError, match=r"pip install 'torchao>=0\.18'"):
        q.quantize_torchao(bert)


#: Lesson 3's calls under Colab's torchao 0.10.0 (installed aside), in a fresh interpreter.
COLABS_TORCHAO = """
import warnings
import torch
from transformers import BertConfig, BertModel
from bertfamily import quantization as q
model = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=64)).eval()
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    int8 = q.quantize_torchao(model, embeddings=True)
ids = torch.randint(0, 50, (2, 8))
print("VERSION", q.torchao_version())
print("PATH", q.torchao_path())
print("WITH", int8.quantized_with)
print("SAID", any("falls back" in str(w.message) for w in said))
eager = q.quantize_linear(model, embeddings=True)
print("EQUAL", torch.equal(int8(ids).last_hidden_state, eager(ids).last_hidden_state))
"""


@pytest.fixture(scope="module")
def colabs_torchao(tmp_path_factory):
    target = tmp_path_factory.mktemp("torchao-0.10.0")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), "torchao==0.10.0"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode:
        pytest.skip(f"torchao 0.10.0 (Colab's) could not be installed here (no package index?): {done.stderr[-300:]}")
    return target


@pytest.mark.slow  # installs Colab's torchao aside, then a fresh interpreter imports transformers
def test_colabs_torchao_keeps_the_lesson_running_on_quantize_dynamic(colabs_torchao):
    path = os.pathsep.join(filter(None, [str(colabs_torchao), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    done = subprocess.run([sys.executable, "-c", COLABS_TORCHAO], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ", 1)[0].isupper())
    assert said["VERSION"] == "0.10.0" and said["WITH"] == q.EAGER
    assert said["PATH"].startswith("torchao 0.10.0 is older than 0.18") and said["SAID"] == "True"
    assert said["EQUAL"] == "True"


def test_pyproject_admits_colabs_torchao_and_tests_with_min_torchao():
    """The runtime requirement keeps Colab's torchao 0.10.0; the test extra asks for the release the
    committed outputs took the torchao path with (quantization.MIN_TORCHAO)."""
    from pathlib import Path

    import tomllib
    from packaging.requirements import Requirement

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    runtime = next(Requirement(r) for r in project["project"]["dependencies"] if r.startswith("torchao"))
    tested = next(
        Requirement(r) for r in project["project"]["optional-dependencies"]["test"] if r.startswith("torchao")
    )
    assert runtime.specifier.contains("0.10.0") and str(tested.specifier) == f">={q.MIN_TORCHAO}"


@pytest.mark.parametrize("threads", [0, -1, 1.5, True])
def test_unpinned_latency_refuses_a_bad_thread_count(threads):
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        unpinned.time_pairs({"input_ids": torch.ones(1, 4, dtype=torch.long)}, threads=threads)


def test_unpinned_pairs_chain_to_speeds_relative_to_the_first_baseline():
    assert unpinned.chain_ratios({("A", "B"): 2.0, ("B", "C"): 3.0}) == {"A": 1.0, "B": 2.0, "C": 6.0}
    speeds = unpinned.chain_ratios(dict.fromkeys(unpinned.PAIRS, 2.0))
    assert list(speeds) == ["BERT-base fp32", "DistilBERT fp32", "DistilBERT int8"]
    with pytest.raises(ValueError, match="does not start from a model timed before"):
        unpinned.chain_ratios({("A", "B"): 2.0, ("C", "D"): 3.0})
    with pytest.raises(ValueError, match="at least one pair"):
        unpinned.chain_ratios({})


def test_the_timing_process_loads_each_model_once_and_never_holds_the_three(monkeypatch, capsys, tiny_config):
    """`unpinned._child` on tiny stand-ins: DistilBERT is built once and quantised for the second pair, and
    BERT-base is gone (no reference left) before the int8 copy is made."""
    import gc
    import io
    import json
    import weakref

    from transformers import DistilBertModel

    from bertfamily import quantization

    built, alive_at_int8 = [], []

    def load(name, verbose=True):
        built.append(name)
        kind = "bert" if name == "bert-base-uncased" else "distilbert"
        model = BertModel(tiny_config()) if kind == "bert" else DistilBertModel(tiny_config(kind))
        if kind == "bert":
            built.append(weakref.ref(model))
        return model.eval()

    real = quantization.quantize_linear

    def quantize(model, **kwargs):
        if isinstance(model, nn.Module) and len(list(model.modules())) > 3:  # the model, not the probe
            gc.collect()
            alive_at_int8.append(built[1]() is not None)
        return real(model, **kwargs)

    monkeypatch.setattr(models, "load_pretrained", load)
    monkeypatch.setattr(quantization, "quantize_linear", quantize)
    payload = {"inputs": {"input_ids": [[1, 2, 3, 4]]}, "threads": 1, "warmup": 0, "runs": 2}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({**payload, "pairs": [list(p) for p in unpinned.PAIRS]})))
    unpinned._child()
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [b for b in built if isinstance(b, str)] == ["bert-base-uncased", "distilbert-base-uncased"]
    assert alive_at_int8 == [False]
    assert [list(p["seconds"]) for p in result["pairs"]] == [list(p) for p in unpinned.PAIRS]
    assert result["threads"] == 1 and result["capability"]
