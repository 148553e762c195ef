"""The course's small pretrained checkpoints: how they are made, and loading them back.

Two lessons need models trained longer than a lesson may run (90 s on 2 cores): lesson 1 compares
masking schedules on a tiny BERT trained for many epochs on BBC articles, and lesson 6 compares MLM,
TLM and the two in turn (XLM's recipe) on parallel sentences. ``make pretrain``
(``tools/pretrain.py``) trains them with the settings below, one seed after the other, and writes
into ``checkpoints/`` (package data, so Colab has them too):

* ``<name>.json``: the settings, the machine, and per run its evaluation curve and final metrics;
* the weights, stored as float16 (half the bytes; the metrics in the log are those of the stored
  weights, so a live evaluation reproduces them): for ``masking`` the seed-0 model of each schedule,
  for ``tlm`` every model.

The lessons rebuild the same data with :func:`masking_data` and :func:`tlm_data`, evaluate the
stored models live, and read the other seeds' results from the log. ``tests/test_checkpoints.py``
re-runs the first evaluation step of a run and compares it with the log.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import torch

FOLDER = Path(str(files("bertfamily") / "checkpoints"))

#: Lesson 1: a tiny BERT on 800 BBC training articles (two 64-piece blocks each), 20 epochs.
MASKING = {"articles": 800, "blocks_per_article": 2, "test_articles": 200, "length": 64, "min_count": 3,
           "hidden": 64, "layers": 2, "heads": 2, "dropout": 0.1, "steps": 1000, "batch": 32, "lr": 3e-3,
           "warmup": 50, "eval_every": 125, "seeds": [0, 1, 2], "schemes": ["static", "static x10", "dynamic"],
           "held_out_seed": 2024, "new_mask_seed": 2025, "stored_seeds": [0]}
#: Lesson 6: MLM, TLM and XLM's alternating MLM+TLM models on the lexicon's parallel sentences
#: (bertfamily.lexicon).
TLM = {"pairs": 3000, "pairs_seed": 0, "test_fraction": 0.2, "split_seed": 0, "vocab": 1000, "hidden": 64,
       "layers": 2, "heads": 4, "steps": 3000, "batch": 32, "probability": 0.3, "seeds": [0, 1, 2],
       "objectives": ["mlm", "tlm", "mlm+tlm"], "stored_seeds": [0, 1, 2], "mismatched_shift": 300}


def _path(name: str) -> Path:
    return FOLDER / name


def read_log(name: str) -> dict:
    """The training log of ``"masking"`` or ``"tlm"``."""
    path = _path(f"{name}.json")
    if not path.is_file():
        raise FileNotFoundError(f"no training log {path}: run `make pretrain` in a clone of the course")
    return json.loads(path.read_text(encoding="utf-8"))


def halve(model) -> None:
    """Round ``model``'s weights to float16 and back, in place: what storing them keeps."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().float())


def save(model, name: str) -> Path:
    path = _path(f"{name}.pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    state, seen = {}, set()
    for key, value in model.state_dict().items():
        if value.data_ptr() in seen:  # a tied copy (the output layer is the input embedding): stored once
            continue
        seen.add(value.data_ptr())
        state[key] = value.half() if value.is_floating_point() else value
    torch.save(state, path)
    return path


def load_into(model, name: str):
    """``model`` with the stored weights ``name`` (float16 on disk, float32 in the model), in eval mode."""
    path = _path(f"{name}.pt")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint {path}: run `make pretrain` in a clone of the course")
    state = torch.load(path, map_location="cpu", weights_only=True)
    missing, unexpected = model.load_state_dict({k: v.float() if v.is_floating_point() else v
                                                 for k, v in state.items()}, strict=False)
    from collections import Counter
    shared = Counter(v.data_ptr() for v in model.state_dict().values())
    tied = {k for k, v in model.state_dict().items() if shared[v.data_ptr()] > 1}
    if unexpected or set(missing) - tied:
        raise ValueError(f"{path} does not fit this model: missing {sorted(set(missing) - tied)}, "
                         f"unexpected {sorted(unexpected)}")
    return model.eval()


def file_name(name: str, key: str, seed: int) -> str:
    return f"{name}-{key.replace(' ', '')}-seed{seed}"


# --------------------------------------------------------------------------- lesson 1's data

@dataclass
class MaskingData:
    """What lesson 1's long runs train and are measured on."""
    train: torch.Tensor     # compact ids, (blocks, length)
    held_out: object        # pretraining.HeldOut on the test articles
    new_mask: object        # pretraining.HeldOut: the training blocks with masks no model trained on
    small: dict             # vocab_size, mask_token_id, special_ids (compact ids)
    config: object          # the BertConfig of every model
    unigram: float          # the unigram baseline on the held-out blanks (nats)
    majority: float         # the most frequent training word's share of the held-out blanks
    words: object = None    # pretraining.CompactVocabulary: WordPiece id <-> compact id


def _compact(tokenizer, train_ids, test_ids, min_count: int):
    from bertfamily.pretraining import compact_corpus
    return compact_corpus(tokenizer, train_ids, test_ids, min_count=min_count)


def masking_data(settings: dict = MASKING) -> MaskingData:
    from bertfamily.data import bbc_split
    from bertfamily.models import minilm_tokenizer
    from bertfamily.pretraining import HeldOut, tiny_bert_config, token_blocks, unigram_baseline

    s = settings
    tokenizer, split = minilm_tokenizer(), bbc_split()
    train_ids = token_blocks(tokenizer, split.train_texts[:s["articles"]], length=s["length"],
                             max_blocks_per_text=s["blocks_per_article"])
    test_ids = token_blocks(tokenizer, split.test_texts[:s["test_articles"]], length=s["length"],
                            max_blocks_per_text=1)
    words, train, test, small = _compact(tokenizer, train_ids, test_ids, s["min_count"])
    held_out = HeldOut.fixed_mask(test, seed=s["held_out_seed"], **small)
    new_mask = HeldOut.fixed_mask(train, seed=s["new_mask_seed"], **small)
    unigram, majority = unigram_baseline(train, held_out, vocab_size=words.size, special_ids=small["special_ids"])
    config = tiny_bert_config(words.size, hidden=s["hidden"], layers=s["layers"], heads=s["heads"],
                              max_positions=s["length"], dropout=s["dropout"])
    return MaskingData(train, held_out, new_mask, small, config, unigram, majority, words)


def masking_scheme(data: MaskingData, name: str, generator):
    from bertfamily.masking import DynamicMasking, StaticMasking
    if name == "static":
        return StaticMasking(data.train, generator=generator, **data.small)
    if name == "static x10":
        return StaticMasking(data.train, copies=10, generator=generator, **data.small)
    if name == "dynamic":
        return DynamicMasking(data.train, generator=generator, **data.small)
    raise ValueError(f"scheme must be one of {MASKING['schemes']}, got {name!r}")


def train_masking_run(data: MaskingData, scheme: str, seed: int, steps: int, settings: dict = MASKING):
    """One of lesson 1's long runs (or its first ``steps``): ``(model, history, the scheme)``."""
    from bertfamily.pretraining import tiny_bert, train_mlm

    s = settings
    generator = torch.Generator().manual_seed(seed)
    masking, model = masking_scheme(data, scheme, generator), tiny_bert(data.config, seed=seed)
    torch.manual_seed(seed)  # dropout draws from torch's global generator: each run starts it afresh
    history = train_mlm(model, masking, steps=steps, batch_size=s["batch"], lr=s["lr"], warmup=s["warmup"],
                        generator=generator, held_out=data.held_out, eval_every=s["eval_every"], progress=False)
    return model, history, masking


def load_masking(data: MaskingData, scheme: str, seed: int = 0):
    """The stored seed-``seed`` model of ``scheme``."""
    from bertfamily.pretraining import tiny_bert
    return load_into(tiny_bert(data.config), file_name("masking", scheme, seed))


# --------------------------------------------------------------------------- lesson 6's data

@dataclass
class TlmData:
    """What lesson 6's models train and are measured on."""
    tokenizer: object
    train: tuple            # (English ids, Italian ids) per training pair
    test: tuple             # the same for the held-out pairs
    translation: dict       # Italian token id -> English token id (the lexicon's words)
    content: set            # the Italian ids of the lexicon's words (nouns, adjectives, verbs)


def tlm_data(settings: dict = TLM) -> TlmData:
    from bertfamily import lexicon, tlm

    s = settings
    pairs = lexicon.lexicon_pairs(s["pairs"], seed=s["pairs_seed"])
    train, test = tlm.split_pairs(pairs, test_fraction=s["test_fraction"], seed=s["split_seed"])
    tokenizer = tlm.train_tokenizer([x for pair in pairs for x in pair], vocab_size=s["vocab"])
    translation = lexicon.translations(tokenizer)
    return TlmData(tokenizer, tlm.encode_pairs(tokenizer, train), tlm.encode_pairs(tokenizer, test),
                   translation, set(translation))


def tlm_blanks(data: TlmData, settings: dict = TLM) -> dict:
    """The held-out blanks of each condition, and which rows hide a lexicon word (the same in each).

    The pairs are sorted, so neighbours share their first words: the mismatched English comes from
    ``mismatched_shift`` pairs further on (about half the held-out set), which says something else."""
    from bertfamily import tlm
    blanks = {c: tlm.italian_blanks(*data.test, c, shift=settings["mismatched_shift"]) for c in tlm.CONDITIONS}
    content = torch.tensor([int(t) in data.content for t in blanks["with"].target])
    return blanks, content


def content_accuracy(model, blanks: dict, content) -> dict:
    from bertfamily import tlm
    return {c: float(tlm.blank_accuracy(model, b)[content].float().mean()) for c, b in blanks.items()}


def load_tlm(data: TlmData, objective: str, seed: int, settings: dict = TLM):
    from bertfamily import tlm
    model = tlm.tiny_model(data.tokenizer.get_vocab_size(), seed=seed, hidden=settings["hidden"],
                           layers=settings["layers"], heads=settings["heads"])
    return load_into(model, file_name("tlm", objective, seed))


# --------------------------------------------------------------------------- lesson 4's sharing runs

#: Lesson 4: what sharing costs, at the course model's depth (4 layers). Lesson 1's tiny BERT, data and dynamic
#: masking (the course model's own width costs 4 s a step here, so six runs of it would take most of a day),
#: its four layers its own (unshared) or one layer applied four times (shared, ALBERT's cross-layer sharing):
#: the same width, depth and multiply-adds, a quarter of the layer weights. At this depth the tiny BERT needs a
#: lower learning rate than lesson 1's (3e-3 leaves some seeds on the word-frequency plateau) and more steps.
SHARING = {**{k: MASKING[k] for k in ("hidden", "heads", "dropout", "batch", "warmup", "seeds")},
           "layers": 4, "steps": 2000, "lr": 1e-3, "eval_every": 250, "variants": ["unshared", "shared"],
           "stored_seeds": [0]}


def share_layers(model):
    """Make every encoder layer of a BERT the first one (one set of weights applied at every depth,
    as ALBERT does), in place; returns the model."""
    layers = model.bert.encoder.layer
    for i in range(1, len(layers)):
        layers[i] = layers[0]
    return model


def _config(data: MaskingData, layers: int, settings: dict):
    """A tiny BERT's config for lesson 1's data with ``layers`` layers and ``settings``' width, heads and dropout."""
    from bertfamily.pretraining import tiny_bert_config
    s = settings
    return tiny_bert_config(data.small["vocab_size"], hidden=s["hidden"], layers=layers, heads=s["heads"],
                            max_positions=data.train.shape[1], dropout=s["dropout"])


def sharing_model(data: MaskingData, variant: str, seed: int = 0, settings: dict = SHARING):
    """A fresh tiny BERT for lesson 1's data, its layers ``"shared"`` or ``"unshared"``."""
    from bertfamily.pretraining import tiny_bert

    if variant not in settings["variants"]:
        raise ValueError(f"variant must be one of {settings['variants']}, got {variant!r}")
    model = tiny_bert(_config(data, settings["layers"], settings), seed=seed)
    return share_layers(model) if variant == "shared" else model


def train_sharing_run(data: MaskingData, variant: str, seed: int, steps: int, settings: dict = SHARING):
    """One of lesson 4's runs (or its first ``steps``), with dynamic masking: ``(model, history)``."""
    from bertfamily.pretraining import train_mlm

    s = settings
    generator = torch.Generator().manual_seed(seed)
    masking, model = masking_scheme(data, "dynamic", generator), sharing_model(data, variant, seed, s)
    torch.manual_seed(seed)  # dropout
    history = train_mlm(model, masking, steps=steps, batch_size=s["batch"], lr=s["lr"], warmup=s["warmup"],
                        generator=generator, held_out=data.held_out, eval_every=s["eval_every"], progress=False)
    return model, history


def load_sharing(data: MaskingData, variant: str, seed: int = 0):
    """The stored seed-``seed`` model of lesson 4's ``variant``."""
    return load_into(sharing_model(data, variant), file_name("sharing", variant, seed))


# --------------------------------------------------------------------------- lesson 2's distillation runs

#: Lesson 2: DistilBERT's recipe on lesson 1's data. A 4-layer teacher is pretrained (dynamic masking); each
#: 2-layer student starts from the teacher's layers 0 and 2 (one in two, with its embeddings and MLM head) or
#: from random weights, and trains with the triple loss or with one of its terms dropped (weights: L_ce,
#: L_mlm, L_cos). "no teacher" is the same small model trained on the masked words alone.
DISTIL = {**{k: MASKING[k] for k in ("hidden", "heads", "dropout", "batch", "warmup", "eval_every")},
          "teacher_layers": 4, "teacher_steps": 3000, "teacher_lr": 3e-3, "teacher_seed": 100,
          "layers": [0, 2], "steps": 1000, "lr": 1e-3, "temperature": 2.0, "seeds": [0, 1, 2],
          "arms": {"triple loss": ["teacher", 5.0, 2.0, 1.0], "without L_ce": ["teacher", 0.0, 2.0, 1.0],
                   "without L_cos": ["teacher", 5.0, 2.0, 0.0], "without L_mlm": ["teacher", 5.0, 0.0, 1.0],
                   "random init": ["random", 5.0, 2.0, 1.0], "no teacher": ["random", 0.0, 2.0, 0.0]}}


def train_distil_teacher(data: MaskingData, steps: int | None = None, settings: dict = DISTIL):
    """Lesson 2's teacher (or its first ``steps``), dynamic masking: ``(model, history)``."""
    from bertfamily.pretraining import tiny_bert, train_mlm

    s = settings
    seed = s["teacher_seed"]
    generator = torch.Generator().manual_seed(seed)
    model = tiny_bert(_config(data, s["teacher_layers"], s), seed=seed)
    masking = masking_scheme(data, "dynamic", generator)
    torch.manual_seed(seed)  # dropout
    history = train_mlm(model, masking, steps=steps or s["teacher_steps"], batch_size=s["batch"], lr=s["teacher_lr"],
                        warmup=s["warmup"], generator=generator, held_out=data.held_out, eval_every=250,
                        progress=False)
    return model, history


def distil_student(data: MaskingData, teacher, arm: str, seed: int = 0, settings: dict = DISTIL):
    """A fresh 2-layer student for ``arm``: the teacher's layers 0 and 2, or random weights."""
    from bertfamily.distillation import student_from_teacher
    from bertfamily.pretraining import tiny_bert

    if arm not in settings["arms"]:
        raise ValueError(f"arm must be one of {list(settings['arms'])}, got {arm!r}")
    if settings["arms"][arm][0] == "teacher":
        return student_from_teacher(teacher, settings["layers"])
    return tiny_bert(_config(data, len(settings["layers"]), settings), seed=seed)


def train_distil_run(data: MaskingData, teacher, arm: str, seed: int, steps: int, settings: dict = DISTIL):
    """One of lesson 2's student runs (or its first ``steps``): ``(student, history)``."""
    from bertfamily.distillation import mlm_triple_loss
    from bertfamily.pretraining import train_mlm

    s = settings
    student = distil_student(data, teacher, arm, seed, s)
    _, alpha_ce, alpha_mlm, alpha_cos = s["arms"][arm]
    loss = mlm_triple_loss(teacher, temperature=s["temperature"], alpha_ce=alpha_ce, alpha_mlm=alpha_mlm,
                           alpha_cos=alpha_cos)
    generator = torch.Generator().manual_seed(seed)
    masking = masking_scheme(data, "dynamic", generator)
    torch.manual_seed(seed)  # dropout
    history = train_mlm(student, masking, steps=steps, batch_size=s["batch"], lr=s["lr"], warmup=s["warmup"],
                        generator=generator, held_out=data.held_out, eval_every=s["eval_every"], progress=False,
                        loss=loss)
    return student, history


# --------------------------------------------------------------------------- the course model

#: The course's own BERT: 4 layers of width 256 (about 6.5M parameters) trained with RoBERTa's dynamic masking
#: and without next-sentence prediction on the BBC training articles, in 128-piece blocks of 128 (16K pieces
#: a step: half of BERT's 32K-piece batches, a sixtieth of RoBERTa's 8K x 512), the WordPiece pieces seen at least
#: ``min_count`` times. AdamW with a linear warm-up, a constant rate, and a linear decay to
#: ``final_lr_fraction`` over the last ``decay`` share of the steps; dropout on the hidden states only. The
#: matrix products run in bfloat16 (``autocast``; fast where the CPU has AMX or AVX-512 BF16, and exact
#: enough: the evaluations run in float32). Settings are chosen on the validation articles; the test
#: articles are scored once, at the end. Lesson 1 shows it filling blanks, lesson 2 distils it, lesson 3
#: quantises it.
COURSE = {"length": 128, "test_blocks_per_article": 2, "min_count": 3, "hidden": 256, "layers": 4, "heads": 4,
          "dropout": 0.1, "attention_dropout": 0.0, "batch": 128, "lr": 1e-3, "warmup": 500, "decay": 0.25,
          "final_lr_fraction": 0.1, "steps": 3600, "eval_every": 200, "seed": 0, "held_out_seed": 2026,
          "autocast": "bfloat16"}


@dataclass
class CourseData:
    """What the course model trains and is measured on."""
    tokenizer: object       # bert-base-uncased's WordPiece tokenizer (all-MiniLM-L6-v2's copy)
    words: object           # pretraining.CompactVocabulary: WordPiece id <-> compact id
    train: torch.Tensor     # compact ids, (blocks, length): every training article cut into blocks
    test: torch.Tensor      # compact ids of the test articles' blocks
    held_out: object        # pretraining.HeldOut: the test blocks masked once (reported, scored at the end)
    small: dict             # vocab_size, mask_token_id, special_ids (compact ids)
    config: object          # the model's BertConfig
    counts: torch.Tensor    # how often each compact id occurs in the training blocks
    articles: int           # training articles
    validation: object = None      # pretraining.HeldOut on the validation articles' blocks (settings, curves)
    test_articles: object = None   # per test block, the index of its article (for article-level intervals)
    validation_articles: object = None


def block_articles(tokenizer, texts, length: int, max_blocks_per_text: int | None = None) -> torch.Tensor:
    """Per block of :func:`~bertfamily.pretraining.token_blocks` (same arguments), the index of its text."""
    body, out = length - 2, []
    for i, ids in enumerate(tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]):
        n = max(0, (len(ids) - body) // body + 1) if len(ids) >= body else 0
        out += [i] * min(n, max_blocks_per_text or n)
    return torch.tensor(out, dtype=torch.long)


def course_data(settings: dict = COURSE) -> CourseData:
    from bertfamily.data import bbc_split
    from bertfamily.models import minilm_tokenizer
    from bertfamily.pretraining import HeldOut, tiny_bert_config, token_blocks

    s = settings
    tokenizer, split = minilm_tokenizer(), bbc_split()
    n, most = s["length"], s["test_blocks_per_article"]
    train_ids = token_blocks(tokenizer, split.train_texts, length=n)
    test_ids = token_blocks(tokenizer, split.test_texts, length=n, max_blocks_per_text=most)
    valid_ids = token_blocks(tokenizer, split.validation_texts, length=n, max_blocks_per_text=most)
    words, train, test, small = _compact(tokenizer, train_ids, test_ids, s["min_count"])
    held_out = HeldOut.fixed_mask(test, seed=s["held_out_seed"], **small)
    validation = HeldOut.fixed_mask(words.encode(valid_ids), seed=s["held_out_seed"] + 1, **small)
    config = tiny_bert_config(words.size, hidden=s["hidden"], layers=s["layers"], heads=s["heads"],
                              max_positions=s["length"], dropout=s["dropout"])
    # dropout on the attention weights costs 40% of a forward pass on CPU (a random draw per weight)
    config.attention_probs_dropout_prob = s["attention_dropout"]
    counts = torch.bincount(train.flatten(), minlength=words.size)
    return CourseData(tokenizer, words, train, test, held_out, small, config, counts, len(split.train_texts),
                      validation, block_articles(tokenizer, split.test_texts, n, most),
                      block_articles(tokenizer, split.validation_texts, n, most))


def autocast(loss, settings: dict):
    """``loss`` run under ``settings["autocast"]`` (a torch dtype's name, or None for float32)."""
    if not settings.get("autocast"):
        return loss

    def wrapped(*args, **kwargs):
        with torch.autocast("cpu", dtype=getattr(torch, settings["autocast"])):
            return loss(*args, **kwargs)
    return wrapped


def learning_rate(step: int, settings: dict = COURSE) -> float:
    """The course model's learning-rate factor at optimiser step ``step`` (0-based)."""
    s = settings
    warm = min(1.0, (step + 1) / s["warmup"])
    start = s["steps"] * (1 - s["decay"])
    if step < start:
        return warm
    return 1.0 - (1.0 - s["final_lr_fraction"]) * (step - start) / (s["steps"] - start)


@torch.no_grad()
@torch.no_grad()
def blank_predictions(model, held_out, batch_size: int = 128) -> dict:
    """Per blank of ``held_out``: the model's five best guesses (``top5``, best first), the true piece
    (``target``), the loss (nats) and whether the word was ``hidden`` (the input holds ``[MASK]`` or a
    random piece there) or kept as it is (a model can copy it from its input)."""
    from bertfamily.masking import IGNORE_INDEX

    was_training = model.training
    model.eval()
    parts = {"top5": [], "target": [], "loss": [], "hidden": []}
    for start in range(0, held_out.input_ids.shape[0], batch_size):
        ids, labels = held_out.input_ids[start:start + batch_size], held_out.labels[start:start + batch_size]
        chosen = labels != IGNORE_INDEX
        logits = model.cls(model.bert(input_ids=ids).last_hidden_state[chosen])
        parts["top5"].append(logits.topk(5, dim=-1).indices)
        parts["target"].append(labels[chosen])
        parts["loss"].append(torch.nn.functional.cross_entropy(logits, labels[chosen], reduction="none"))
        parts["hidden"].append(ids[chosen] != labels[chosen])
    model.train(was_training)
    return {key: torch.cat(value) for key, value in parts.items()}


def blank_scores(model, held_out, batch_size: int = 128) -> dict:
    """Top-1 and top-5 accuracy and loss of ``model`` on ``held_out``'s blanks, in two groups:
    ``hidden`` (the word must be guessed) and ``kept`` (the 10% of blanks left as they are, which a
    model can copy from its input); see :func:`blank_predictions`."""
    return scores_of(blank_predictions(model, held_out, batch_size))


def scores_of(p: dict) -> dict:
    """:func:`blank_scores` from the output of :func:`blank_predictions`."""
    top1 = p["top5"][:, 0] == p["target"]
    top5 = (p["top5"] == p["target"][:, None]).any(-1)
    return {group: {"top1": float(top1[rows].double().mean()), "top5": float(top5[rows].double().mean()),
                    "loss": float(p["loss"][rows].double().mean()), "blanks": int(rows.sum())}
            for group, rows in (("hidden", p["hidden"]), ("kept", ~p["hidden"]))}


def course_model(data: CourseData, seed: int | None = None, settings: dict = COURSE):
    """A fresh (untrained) course model, with ``settings["layers"]`` layers (the course model's 4, or
    lesson 2's 2-layer control)."""
    import copy

    from bertfamily.pretraining import tiny_bert
    config = copy.deepcopy(data.config)
    config.num_hidden_layers = settings["layers"]
    return tiny_bert(config, seed=settings["seed"] if seed is None else seed)


def train_course_model(data: CourseData, steps: int | None = None, settings: dict = COURSE, progress=True,
                       on_evaluation=None, evaluate: bool = True, on_step=None):
    """Train the course model (or its first ``steps``): ``(model, log)``.

    ``log`` holds the training loss of every step and, every ``eval_every`` steps, the scores of
    :func:`blank_scores`; ``on_evaluation(model, log)`` is called after each evaluation (make pretrain
    stores the weights there, so a run cut short still leaves its last model). ``evaluate=False``: the
    training losses only (what the reproduction tests compare). ``on_step(model, step)`` is called after
    every optimiser step (``step`` from 1).
    """
    s = settings
    steps = steps or s["steps"]
    model = course_model(data, settings=s)
    log = _course_loop(data, model, s, steps, {"train_loss": [], "evaluations": []}, "course model", progress,
                       on_evaluation, evaluate=evaluate, on_step=on_step)
    model.eval()
    return model, log


def _course_loop(data: CourseData, model, s: dict, steps: int, log: dict, desc: str, progress, on_evaluation,
                 loss=None, evaluate: bool = True, on_step=None) -> dict:
    """The course model's training loop, shared by its pretraining and its distillation: dynamic masks and
    batch order from a generator seeded ``s["seed"]``, AdamW with :func:`learning_rate`, the loss under
    :func:`autocast`, and :func:`blank_scores` on the validation blanks into ``log`` every ``eval_every``
    steps (then ``on_evaluation(model, log)``)."""
    from bertfamily.masking import DynamicMasking
    from bertfamily.pretraining import masked_lm_loss, mlm_steps

    generator = torch.Generator().manual_seed(s["seed"])
    masking = DynamicMasking(data.train, generator=generator, **data.small)
    optimizer = torch.optim.AdamW(model.parameters(), lr=s["lr"], weight_decay=0.01, foreach=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate(step, s))

    def batch(rows, epoch):
        return (*masking(rows, epoch), {})

    def after(step):
        if on_step is not None:
            on_step(model, step)
        if evaluate and (step % s["eval_every"] == 0 or step == steps):
            log["evaluations"].append({"step": step, **blank_scores(model, data.validation)})
            model.train()
            if on_evaluation is not None:
                on_evaluation(model, log)

    torch.manual_seed(s["seed"])  # dropout
    log["train_loss"], log["epochs"] = mlm_steps(model, optimizer, schedule, batch, sequences=len(masking),
                                                 batch_size=s["batch"], steps=steps, generator=generator,
                                                 progress=progress, desc=desc, after_step=after,
                                                 loss=autocast(loss or masked_lm_loss, s))
    return log


#: Lesson 1's two showcases of test blanks, each answered by the course model (``make pretrain`` logs their
#: top guesses at every evaluation): ``hard``, content words of four letters or more spread evenly over the
#: test articles (:func:`bertfamily.fill.showcase_blanks`), and ``random``, blanks of any kind drawn at
#: random (:func:`bertfamily.fill.random_blanks`).
SHOWCASE = {"count": 10, "min_letters": 4, "random_seed": 0, "guesses": 3}


def showcase(data: CourseData, settings: dict = SHOWCASE) -> dict:
    """``{"hard": [(block, position), ...], "random": [...]}``: the blanks of :data:`SHOWCASE` in
    ``data.held_out`` (the test blocks)."""
    from bertfamily import baselines, fill

    s, where = settings, (data.held_out, data.words, data.tokenizer, data.test_articles)
    return {"hard": fill.showcase_blanks(*where, count=s["count"], min_letters=s["min_letters"],
                                         stop_words=baselines.STOP_WORDS),
            "random": fill.random_blanks(*where, count=s["count"], seed=s["random_seed"])}


def showcase_guesses(model, data: CourseData, blanks: dict, settings: dict = SHOWCASE) -> dict:
    """The model's best ``settings["guesses"]`` pieces (with probabilities) at each showcase blank."""
    from bertfamily import fill
    return {name: fill.guesses_at(model, data.held_out, chosen, data.words, data.tokenizer, settings["guesses"])
            for name, chosen in blanks.items()}


def load_course_model(data: CourseData, settings: dict = COURSE):
    """The stored course model (float16 on disk), in eval mode."""
    return load_into(course_model(data, settings=settings), "course-model")


# --------------------------------------------------------------------------- the course model distilled

#: Lesson 2 at the course's scale: the course model (the teacher, as stored) and three students with half its
#: layers, trained ``steps`` steps each on the same masked batches in the same order, with the same schedule:
#:
#: * ``distilled``: DistilBERT's recipe, the teacher's layers 0 and 2 (with its embeddings and head) trained with
#:   the triple loss (weights L_ce, L_mlm, L_cos);
#: * ``hard labels``: the same start, trained on the masked words alone (L_mlm): what the teacher's soft
#:   distribution and hidden states add is ``distilled`` minus this;
#: * ``random init``: the same 2-layer shape from random weights, trained on the masked words alone: what the
#:   teacher's layers as a start add is ``hard labels`` minus this.
COURSE_DISTIL = {"layers": [0, 2], "steps": 300, "batch": 128, "lr": 5e-4, "warmup": 40, "decay": 0.5,
                 "final_lr_fraction": 0.1, "temperature": 2.0, "eval_every": 100, "seed": 0, "autocast": "bfloat16",
                 "arms": {"distilled": ("teacher", [5.0, 2.0, 1.0]), "hard labels": ("teacher", [0.0, 1.0, 0.0]),
                          "random init": ("random", [0.0, 1.0, 0.0])}}


def course_student(data: CourseData, teacher, arm: str = "distilled", settings: dict = COURSE_DISTIL):
    """A student of ``arm`` before training: the teacher's layers ``settings["layers"]``, or random weights."""
    from bertfamily.distillation import student_from_teacher

    if arm not in settings["arms"]:
        raise ValueError(f"arm must be one of {list(settings['arms'])}, got {arm!r}")
    if settings["arms"][arm][0] == "teacher":
        return student_from_teacher(teacher, settings["layers"])
    return course_model(data, settings={**COURSE, "layers": len(settings["layers"])})


def distil_course_model(data: CourseData, teacher, arm: str, steps: int | None = None,
                        settings: dict = COURSE_DISTIL, progress=True, on_evaluation=None, evaluate: bool = True):
    """Train the student of ``arm`` (see :data:`COURSE_DISTIL`): ``(student, log)``.

    Every arm sees the same masked batches in the same order (the masking and order draw from a generator
    seeded ``settings["seed"]``), with the learning-rate shape of :func:`learning_rate`. ``log`` holds each
    step's loss and, every ``eval_every`` steps (and at step 0), :func:`blank_scores` on the validation blanks
    (``evaluate=False``: the losses only).
    """
    from bertfamily.distillation import mlm_triple_loss

    s = settings
    steps = steps or s["steps"]
    student = course_student(data, teacher, arm, s)
    alpha_ce, alpha_mlm, alpha_cos = s["arms"][arm][1]
    targets = s["arms"][arm][2] if len(s["arms"][arm]) > 2 else "soft"
    loss = None if alpha_ce == alpha_cos == 0 and alpha_mlm == 1 else mlm_triple_loss(  # no teacher: plain MLM
        teacher, temperature=s["temperature"], alpha_ce=alpha_ce, alpha_mlm=alpha_mlm, alpha_cos=alpha_cos,
        targets=targets)
    log = {"train_loss": [], "evaluations": [{"step": 0, **blank_scores(student, data.validation)}] if evaluate else []}
    log = _course_loop(data, student, s, steps, log, arm, progress, on_evaluation, loss=loss, evaluate=evaluate)
    student.eval()
    return student, log


#: Lesson 2's compute-matched control, Turc et al. (2019)'s question "distil, or train the small model longer?": a model
#: of the students' shape (2 layers) from random weights, trained with the course model's own from-scratch recipe
#: (:data:`COURSE`) for the teacher's steps plus a student's (3,600 + 300), the budget that made the distilled
#: student. Its steps cost less than the teacher's (half the layers), so it is matched in steps and tokens seen.
COURSE_CONTROL = {**COURSE, "layers": len(COURSE_DISTIL["layers"]), "steps": COURSE["steps"] + COURSE_DISTIL["steps"]}


def load_course_control(data: CourseData, settings: dict = COURSE_CONTROL):
    """Lesson 2's stored compute-matched control (see :data:`COURSE_CONTROL`), in eval mode."""
    return load_into(course_model(data, settings=settings), "course-control")


def load_course_student(data: CourseData, arm: str, settings: dict = COURSE_DISTIL):
    """Lesson 2's stored student of ``arm`` (see :data:`COURSE_DISTIL`), in eval mode."""
    if arm not in settings["arms"]:
        raise ValueError(f"arm must be one of {list(settings['arms'])}, got {arm!r}")
    model = course_model(data, settings={**COURSE, "layers": len(settings["layers"])})
    return load_into(model, "course-student-" + arm.replace(" ", "-"))


# --------------------------------------------------------------------------- distillation where data is scarce

#: Lesson 2's second experiment, Hinton et al.'s section 6 at the course's scale: the students of
#: :data:`COURSE_DISTIL` trained on a small share of the training articles (``fraction``, drawn once with
#: ``articles_seed``; the share was fixed before any test blank was scored), long enough for the hard-label
#: student to overfit, evaluated on the validation blanks every ``eval_every`` steps. Every arm starts from the
#: teacher's layers 0 and 2 and sees the same masked blocks in the same order for a seed:
#:
#: * ``hard labels``: the masked words alone (L_mlm);
#: * ``distilled``: the triple loss, the teacher's soft distribution at T = 2 (L_ce), the masked words (L_mlm)
#:   and its hidden states (L_cos), as in :data:`COURSE_DISTIL`;
#: * ``first guesses``: the same triple loss with the teacher's distribution replaced by its first guess
#:   (:func:`bertfamily.distillation.first_guess`): what the softness adds is ``distilled`` minus this.
#:
#: The runs go seed by seed (``jobs``), so a run cut short leaves pairs. A quarter of :data:`COURSE_DISTIL`'s batch
#: (the share holds 145 blocks: four steps an epoch), for the two cores' time; 200 steps are 50 epochs.
COURSE_SCARCE = {**COURSE_DISTIL, "fraction": 0.03, "articles_seed": 0, "batch": 32, "steps": 200, "eval_every": 20,
                 "arms": {"hard labels": ("teacher", [0.0, 1.0, 0.0]), "distilled": ("teacher", [5.0, 2.0, 1.0]),
                          "first guesses": ("teacher", [5.0, 2.0, 1.0], "first guess")},
                 "jobs": [["hard labels", 0], ["distilled", 0], ["hard labels", 1], ["distilled", 1],
                          ["first guesses", 0], ["hard labels", 2], ["distilled", 2]]}


def scarce_articles(data: CourseData, settings: dict = COURSE_SCARCE) -> torch.Tensor:
    """The indices of the training articles in the scarce share, sorted: ``round(fraction * articles)`` of them,
    drawn with a generator seeded ``articles_seed``."""
    s = settings
    if not 0 < s["fraction"] <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {s['fraction']}")
    count = max(1, round(s["fraction"] * data.articles))
    chosen = torch.randperm(data.articles, generator=torch.Generator().manual_seed(s["articles_seed"]))[:count]
    return chosen.sort().values


def scarce_data(data: CourseData, settings: dict = COURSE_SCARCE) -> CourseData:
    """``data`` with only the training blocks of :func:`scarce_articles` (the evaluation sets unchanged)."""
    import dataclasses

    from bertfamily.data import bbc_split

    of_block = block_articles(data.tokenizer, bbc_split().train_texts, data.train.shape[1])
    if len(of_block) != data.train.shape[0]:
        raise ValueError(f"{len(of_block)} blocks of articles for {data.train.shape[0]} training blocks: "
                         "the data are not course_data()'s")
    chosen = scarce_articles(data, settings)
    train = data.train[torch.isin(of_block, chosen)]
    return dataclasses.replace(data, train=train, articles=len(chosen),
                               counts=torch.bincount(train.flatten(), minlength=data.counts.numel()))


def right_answers(model, held_out) -> str:
    """Per hidden blank of ``held_out`` (in :func:`blank_predictions`' order), ``"1"`` where the model's first
    guess is the word and ``"0"`` where not: what an article-level bootstrap resamples."""
    p = blank_predictions(model, held_out)
    right = (p["top5"][:, 0] == p["target"])[p["hidden"]]
    return "".join("1" if r else "0" for r in right.tolist())


def train_scarce_run(data: CourseData, teacher, arm: str, seed: int, steps: int | None = None,
                     settings: dict = COURSE_SCARCE, progress=True, on_evaluation=None, evaluate: bool = True):
    """One run of :data:`COURSE_SCARCE` on ``data`` (already :func:`scarce_data`): ``(student, log, best)``,
    where ``best`` is the student's state at its best validation top-1 (the early-stopped model)."""
    import copy

    s = {**settings, "seed": seed}
    best = {"top1": -1.0, "state": None, "step": None}

    def after(model, log):
        last = log["evaluations"][-1]
        if last["hidden"]["top1"] > best["top1"]:
            best.update(top1=last["hidden"]["top1"], step=last["step"], state=copy.deepcopy(model.state_dict()))
        if on_evaluation is not None:
            on_evaluation(model, log)

    student, log = distil_course_model(data, teacher, arm, steps, s, progress, after if evaluate else None, evaluate)
    return student, log, best
