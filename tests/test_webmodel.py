"""The course model exported for the browser (bertfamily.webmodel) and run by bertfamily/web/fillmask.js.

The export is read back and compared with the model; the page's JavaScript (its core, run in Node)
cuts text into the same WordPiece ids as the Python tokenizer and gives the same five guesses with
the same probabilities as ``fill.guess`` in torch: on a tiny random model (fast) and on the course
model itself (slow: it loads the course data). tests/test_browser_fill.py runs it in Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import SENTENCES

from bertfamily import fill, webmodel
from bertfamily.checkpoints.common import halve
from bertfamily.models import minilm_tokenizer
from bertfamily.pretraining import CompactVocabulary, tiny_bert, tiny_bert_config

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "lib" / "bertfamily" / "web" / "fillmask.js"
RUNNER = ROOT / "tests" / "fillmask_node.js"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="Node.js is not installed (apt-get install nodejs)")

TEXT = (
    "the minister said on tuesday that the government would publish its plans for the railway network "
    "before parliament returns in september and that ticket prices would not rise. the chancellor said "
    "the economy would grow by 3% next year; manchester united won the match 2-1."
)
#: Texts on which the browser's tokenizer must cut exactly as the Python one (no model needed).
TRICKY = [
    "Café Zürich, naïve résumé!",
    "He said: \u201cdon't\u201d \u2014 ok\u2026",
    "tab\there\nnew line",
    "北京 is in China",
    "emoji \U0001f600 and \u00e9\u0301",
    "[MASK][MASK] [CLS] [mask]",
    "x" * 120 + " short",
    "self-driving cars' 10.5% rise (q3)",
    "unaffable reestablishment",
    "\u00a0non\u00a0breaking\u200bzero",
    "Ünïcödé ÅNGSTRÖM ß ﬁ",
]


def run_node(folder, texts) -> list:
    out = subprocess.run(
        [NODE, str(RUNNER), str(SCRIPT), str(folder)],
        input=json.dumps(texts),
        text=True,
        capture_output=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout)["results"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny random BERT over a compact vocabulary of TEXT's pieces, float16-exact, exported."""
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
    model = tiny_bert(tiny_bert_config(words.size, hidden=32, layers=2, heads=4, max_positions=40), seed=1)
    halve(model)
    model.eval()
    folder = tmp_path_factory.mktemp("tiny-export")
    manifest = webmodel.export(model, words, tokenizer, folder)
    return tokenizer, words, model, folder, manifest


def test_export_reads_back_as_the_model(tiny):
    tokenizer, words, model, folder, manifest = tiny
    read_manifest, state = webmodel.read(folder)
    assert read_manifest["compact_ids"] == words.original_ids.tolist()
    expected = model.state_dict()
    floating = {k for k, v in expected.items() if v.is_floating_point()}
    assert set(state) == floating
    for name in floating:
        assert torch.equal(state[name], expected[name]), name
    # each tensor once: the tied output layer is not stored twice
    assert manifest["bytes"] == webmodel.download_bytes(folder)
    assert (folder / webmodel.WEIGHTS).stat().st_size == 2 * sum(t["count"] for t in manifest["tensors"])
    assert "cls.predictions.decoder.weight" not in {t["name"] for t in manifest["tensors"]}


def test_export_refuses_what_the_browser_cannot_run(tiny, tmp_path):
    tokenizer, words, model, folder, _ = tiny
    with pytest.raises(TypeError, match="BertForMaskedLM"):
        webmodel.export(model.bert, words, tokenizer, tmp_path)
    other = tiny_bert(tiny_bert_config(words.size + 1, hidden=32, layers=1, heads=4))
    with pytest.raises(ValueError, match="compact vocabulary has"):
        webmodel.export(other, words, tokenizer, tmp_path)
    relu = tiny_bert(tiny_bert_config(words.size, hidden=32, layers=1, heads=4))
    relu.config.hidden_act = "relu"
    with pytest.raises(ValueError, match="exact GELU"):
        webmodel.export(relu, words, tokenizer, tmp_path)


@needs_node
def test_browser_tokenizer_cuts_as_the_python_one(tiny):
    tokenizer, words, model, folder, _ = tiny
    results = run_node(folder, TRICKY + SENTENCES)
    for text, result in zip(TRICKY + SENTENCES, results, strict=True):
        assert result.get("ids") == tokenizer(text)["input_ids"], text


def _compare(results, model, words, tokenizer, sentences, tolerance=1e-5):
    for text, result in zip(sentences, results, strict=True):
        expected = fill.guess(model, text, words, tokenizer)
        assert "error" not in result, (text, result)
        assert len(result["guesses"]) == len(expected) == text.count("[MASK]")
        for got, want in zip(result["guesses"], expected, strict=True):
            assert [p for p, _ in got] == [p for p, _ in want], text
            assert [q for _, q in got] == pytest.approx([q for _, q in want], abs=tolerance), text


@needs_node
def test_browser_guesses_equal_torch_on_a_tiny_model(tiny):
    tokenizer, words, model, folder, _ = tiny
    sentences = [s for s in SENTENCES if len(tokenizer(s)["input_ids"]) <= model.config.max_position_embeddings]
    _compare(run_node(folder, sentences), model, words, tokenizer, sentences)


@needs_node
def test_browser_says_what_is_wrong_as_python_does(tiny):
    tokenizer, words, model, folder, _ = tiny
    too_long = "the [MASK] " + "said " * 60
    results = run_node(folder, ["no blank here", too_long])
    with pytest.raises(ValueError) as python_error:
        fill.guess(model, "no blank here", words, tokenizer)
    assert results[0].get("ids") and results[0]["guesses"] == []  # the runner only guesses where [MASK] is
    assert "at least one [MASK]" in str(python_error.value)
    with pytest.raises(ValueError) as python_error:
        fill.guess(model, too_long, words, tokenizer)
    assert results[1]["error"] == str(python_error.value)


@needs_node
@pytest.mark.slow
def test_browser_guesses_equal_torch_on_the_course_model(tmp_path):
    from bertfamily.checkpoints.course import course_data, load_course_model

    done = webmodel.site_export(tmp_path)
    data = course_data()
    model = load_course_model(data)
    assert done["parameters"] == sum(p.numel() for p in model.parameters())
    _compare(run_node(tmp_path, SENTENCES), model, data.words, data.tokenizer, SENTENCES)
    assert webmodel.site_export(tmp_path) == done  # the same checkpoint: the export is reused


needs_chromium = pytest.mark.skipif(
    not Path(os.environ.get("CHROMIUM", "/usr/bin/chromium")).is_file(),
    reason="no Chromium (apt-get install chromium, or set CHROMIUM)",
)


@needs_chromium
def test_benchmark_measures_the_box_in_chromium_offline(tiny, playwright_driver):
    """benchmarks.browser's browser_fill_times on the tiny export: a reader's keystrokes in Chromium give
    fill.guess's guesses; the model downloads only on the first request; the times and bytes are the page's."""
    from benchmarks.browser import browser_fill_record, browser_fill_times
    from benchmarks.report import markdown
    from benchmarks.verdicts import BUDGETS, summarize

    tokenizer, words, model, folder, _ = tiny
    sentences = SENTENCES[:3]
    result = browser_fill_times(folder, sentences, driver=playwright_driver)
    assert result["status"] == "ok" and result["errors"] == [] and result["left_site"] == []
    # nothing of the model before; the two files are fetched side by side, in either order
    assert result["downloaded"] == sorted([webmodel.MANIFEST, webmodel.WEIGHTS])
    assert result["download_bytes"] == webmodel.download_bytes(folder) == result["model_bytes"]
    assert result["page_bytes"] >= (webmodel.WEB / "fillmask.js").stat().st_size
    assert len(result["guess_s"]) == len(sentences) - 1
    assert 0 < result["load_s"] < result["first_guess_s"] and all(t > 0 for t in result["guess_s"])
    for text, shown in zip(sentences, result["guesses"], strict=True):
        expected = fill.guess(model, text, words, tokenizer)
        assert [[p for p, _ in g] for g in shown] == [[p for p, _ in g] for g in expected], text
    record = {
        "budgets": dict(BUDGETS),
        "notebooks": [],
        "sample_interval_s": 0.05,
        "browser_fill": browser_fill_record(result),
        "machine": {
            "date": "d",
            "cpu_model": "c",
            "cores_used": 2,
            "cpu_count": 2,
            "torch_threads": 2,
            "memory_gib": 1,
            "python": "3",
            "torch": "t",
            "transformers": "t",
            "offline": True,
            "loadavg_before": [0],
        },
    }
    summarize(record)
    assert record["browser_fill"]["guesses"] == sum(s.count("[MASK]") for s in sentences)
    text = markdown(record)
    assert f"downloads {result['download_bytes']:,} bytes" in text and "each guess after it takes" in text
