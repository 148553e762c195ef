"""The experiment of the XLM lesson: does translation language modelling teach a model to read the
translation?

The input construction itself (``[CLS] en [SEP] it [SEP]``, language ids, positions restarting at
the second sentence, one mask across the pair) is :func:`bertfamily.masking.tlm_inputs` and
:func:`bertfamily.masking.mask_tokens`. This module holds only what the lesson's experiment needs
around them; the data helpers are :mod:`bertfamily.pairs`' (the lesson imports them from there):

* :func:`~bertfamily.pairs.train_tokenizer`: a small WordPiece vocabulary learned from the training sentences of both
  languages (one vocabulary for the two, as in XLM), so the model stays tiny.
* :func:`~bertfamily.pairs.split_pairs`: held-out pairs that share no sentence with the training pairs.
* :func:`~bertfamily.pairs.keep_short`: drops the few paragraph-long pairs that would pad every batch.
* :func:`tiny_model`: the tiny BERT (token types as language embeddings, eager attention).
* :func:`~bertfamily.pairs.monolingual_inputs`: the MLM baseline's input, each sentence alone with its language id.
* :func:`training_batch` and :func:`train_pairs`: the two objectives on the same pairs, same steps,
  same text per step; only the packing differs (MLM: each sentence alone; TLM: the pair together).
  ``"mlm+tlm"`` (:data:`ALTERNATING`) is XLM's recipe: MLM and TLM batches in turn.
* :func:`italian_blanks`, :func:`blank_predictions` and :func:`blank_accuracy`: every token of the
  second side of held-out pairs masked in turn, scored in three conditions: the translation visible
  (``"with"``), no translation (``"without"``), and the translation of *another* pair
  (``"mismatched"``), which keeps the TLM layout but removes the information.
* :func:`attention_to_first` and :func:`blank_attention`: where the blanks look in the first sentence.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .masking import IGNORE_INDEX, mask_tokens, tlm_inputs
from .pairs import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK, monolingual_inputs
from .parallel import in_processes
from .pretraining import check_steps, mlm_steps, tiny_bert, tiny_bert_config
from .timing import threads

OBJECTIVES = ("mlm", "tlm")
#: XLM's recipe: one step MLM (each sentence alone), the next TLM (the pair together), and so on.
ALTERNATING = "mlm+tlm"
#: What :func:`train_pairs` and :func:`train_models` accept.
TRAINING_OBJECTIVES = (*OBJECTIVES, ALTERNATING)
CONDITIONS = ("with", "without", "mismatched")

__all__ = ["OBJECTIVES", "ALTERNATING",
           "TRAINING_OBJECTIVES", "CONDITIONS",
           "training_batch",
           "tiny_model", "laid_out", "train_pairs", "train_models", "Blanks", "italian_blanks", "blank_predictions",
           "blank_accuracy", "attention_to_first",
           "blank_attention"]


# --------------------------------------------------------------------------- model and training

def tiny_model(vocab_size: int, *, seed: int = 0, hidden: int = 64, layers: int = 1, heads: int = 2,
               intermediate: int | None = None, max_positions: int = 64):
    """The lesson's tiny ``BertForMaskedLM``: :func:`~bertfamily.pretraining.tiny_bert` with two
    token-type rows, which serve as XLM's language embeddings, and eager attention, so that the
    attention weights can be read back. The feed-forward width defaults to ``2 * hidden``
    (BERT uses 4x; half of it makes a training step a third cheaper on a CPU)."""
    config = tiny_bert_config(vocab_size, hidden=hidden, layers=layers, heads=heads,
                              intermediate=intermediate or 2 * hidden, max_positions=max_positions,
                              type_vocab_size=2)
    model = tiny_bert(config, seed)
    model.set_attn_implementation("eager")
    return model


def _model_inputs(batch: dict) -> dict:
    return {"attention_mask": batch["attention_mask"], "token_type_ids": batch["language_ids"],
            "position_ids": batch["position_ids"]}


def training_batch(first, second, rows, objective: str) -> dict[str, torch.Tensor]:
    """The unmasked input of one step on pairs ``rows``: ``"tlm"`` packs each pair into one
    sequence; ``"mlm"`` gives each sentence of the pairs alone (twice as many, shorter, rows)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    a, b = [first[i] for i in rows], [second[i] for i in rows]
    if objective == "tlm":
        return tlm_inputs(a, b, cls_id=CLS, sep_id=SEP, pad_id=PAD)
    return monolingual_inputs(a + b, [0] * len(a) + [1] * len(b))


def laid_out(first, second, objectives=OBJECTIVES):
    """Every pair laid out once per objective; returns ``serve(rows, objective)``, which gives the
    same tensors as ``training_batch(first, second, rows, objective)`` by taking the rows and cutting
    them to their longest one, without building them again at every step."""
    n = len(first)
    full = {o: training_batch(first, second, range(n), o) for o in objectives}

    def serve(rows, objective):
        rows = torch.as_tensor(rows, dtype=torch.long)
        index = rows if objective == "tlm" else torch.cat([rows, rows + n])  # MLM: firsts, then seconds
        part = {k: v[index] for k, v in full[objective].items()}
        width = int(part["attention_mask"].sum(1).max())
        return {k: v[:, :width].contiguous() for k, v in part.items()}
    return serve


def train_pairs(model, first, second, objective: str, *, steps: int, batch_size: int = 32,
                lr: float = 5e-3, warmup: int = 20, probability: float = 0.15,
                generator: torch.Generator | None = None, progress: bool = True,
                until: int | None = None) -> list[float]:
    """Train ``model`` (a ``BertForMaskedLM`` with ``type_vocab_size=2``) with MLM, TLM, or both in
    turn (``"mlm+tlm"``, XLM's recipe: MLM on steps 1, 3, 5, ..., TLM on steps 2, 4, ...).

    Each step takes ``batch_size`` pairs (every pair once per epoch, in an order drawn from
    ``generator``), builds :func:`training_batch` and masks it with
    :func:`~bertfamily.masking.mask_tokens` (``probability``, 80/10/10), fresh every step. AdamW
    with a linear warm-up then a linear decay to zero. Returns the training loss of every step.
    ``until`` stops after that many steps of the same schedule (a test re-runs the start of a run).
    """
    if len(first) != len(second) or not first:
        raise ValueError(f"first and second must hold the same, non-zero number of sentences, "
                         f"got {len(first)} and {len(second)}")
    check_steps(steps, batch_size, len(first), "pairs")
    if objective not in TRAINING_OBJECTIVES:
        raise ValueError(f"objective must be one of {TRAINING_OBJECTIVES}, got {objective!r}")
    vocab = model.config.vocab_size
    layouts = OBJECTIVES if objective == ALTERNATING else (objective,)
    step = iter(range(steps))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, foreach=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / max(warmup, 1), max(0.0, (steps - s) / max(steps - warmup, 1))))

    serve = laid_out(first, second, layouts)

    def batch(rows, epoch):
        layout = layouts[next(step) % len(layouts)]
        pairs = serve(rows, layout)
        corrupted, labels = mask_tokens(pairs["input_ids"], vocab_size=vocab, mask_token_id=MASK,
                                        special_ids=range(len(SPECIAL_TOKENS)), probability=probability,
                                        special_mask=pairs["special_mask"], generator=generator)
        return corrupted, labels, _model_inputs(pairs)

    losses, _ = mlm_steps(model, optimizer, schedule, batch, sequences=len(first), batch_size=batch_size,
                          steps=min(steps, until or steps), generator=generator, progress=progress,
                          desc=objective.upper())
    model.eval()
    return losses


def _train_job(args):
    (vocab_size, first, second, objective, seed, steps, batch_size, model_kw, train_kw) = args
    with threads(1):  # one thread per model: the result does not depend on the cores
        model = tiny_model(vocab_size, seed=seed, **model_kw)
        losses = train_pairs(model, first, second, objective, steps=steps, batch_size=batch_size,
                             generator=torch.Generator().manual_seed(seed), progress=False, **train_kw)
    return model.state_dict(), losses


def train_models(vocab_size: int, first, second, jobs: Sequence[tuple[str, int]], *, steps: int,
                 batch_size: int = 32, processes: int | None = None, model_kw: dict | None = None,
                 progress: bool = True, **train_kw):
    """Train one :func:`tiny_model` per ``(objective, seed)`` in ``jobs`` with :func:`train_pairs`.

    Each model is trained on one thread, from ``tiny_model(vocab_size, seed=seed)`` with a generator
    seeded by ``seed``, exactly as a serial loop would; the jobs are independent, so they run in
    ``processes`` worker processes at once (default: one per CPU, at most one per job), which on a
    2-core machine halves the wall time (:func:`~bertfamily.parallel.in_processes`). The workers
    are fresh interpreters (:data:`~bertfamily.parallel.START_METHOD`),
    never forks of this process: they inherit its environment variables (the pinned kernels) but
    nothing it has set up, such as CUDA, which a forked child cannot use. Where that start method
    is missing (Windows), or with ``processes=1``, the jobs run one after the other in this
    process. The results are the same either way. Returns ``(models, losses)``, two dicts keyed by
    ``(objective, seed)``.
    """
    jobs = [(str(o), int(s)) for o, s in jobs]
    if not jobs or len(set(jobs)) != len(jobs):
        raise ValueError(f"jobs must be distinct (objective, seed) pairs, got {jobs!r}")
    for objective, _ in jobs:
        if objective not in TRAINING_OBJECTIVES:
            raise ValueError(f"objective must be one of {TRAINING_OBJECTIVES}, got {objective!r}")
    model_kw = dict(model_kw or {})
    args = [(vocab_size, first, second, o, s, steps, batch_size, model_kw, train_kw) for o, s in jobs]
    results = dict(zip(jobs, in_processes(_train_job, args, processes, progress, desc="models"), strict=True))
    models, losses = {}, {}
    for (objective, seed), (state, loss) in results.items():
        model = tiny_model(vocab_size, seed=seed, **model_kw)
        model.load_state_dict(state)
        models[objective, seed] = model.eval()
        losses[objective, seed] = loss
    return models, losses


# --------------------------------------------------------------------------- evaluation

@dataclass
class Blanks:
    """Held-out sequences with exactly one masked token of the second sentence each."""
    inputs: dict          # tlm_inputs / monolingual_inputs keys, input_ids already masked
    labels: torch.Tensor  # the hidden id at the blank, IGNORE_INDEX elsewhere
    pair: torch.Tensor    # which held-out pair each row comes from
    target: torch.Tensor  # the hidden id
    in_first: torch.Tensor  # True where the hidden id also occurs in the pair's first sentence

    def __len__(self) -> int:
        return int(self.target.numel())


def italian_blanks(first, second, condition: str, *, shift: int = 1) -> Blanks:
    """Every token of every second sentence masked in turn (``[UNK]`` excluded), under ``condition``:

    * ``"with"``: ``[CLS] first [SEP] second [SEP]``, the translation visible;
    * ``"without"``: ``[CLS] second [SEP]`` alone, as MLM trains;
    * ``"mismatched"``: the pair's first sentence replaced by the one ``shift`` pairs further on, so
      the input has the TLM layout but the English no longer says the same thing.
    """
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}")
    if len(first) != len(second) or not first:
        raise ValueError(f"first and second must hold the same, non-zero number of sentences, "
                         f"got {len(first)} and {len(second)}")
    n = len(first)
    if condition == "mismatched" and (n < 2 or shift % n == 0):
        raise ValueError(f"mismatched needs at least two pairs and a shift that is not a multiple of {n}")
    rows_first, rows_second, pair, where, target, in_first = [], [], [], [], [], []
    for k in range(n):
        context = first[(k + shift) % n] if condition == "mismatched" else first[k]
        for j, token in enumerate(second[k]):
            if token == UNK:
                continue
            rows_first.append(context)
            rows_second.append(second[k])
            pair.append(k)
            where.append(j)
            target.append(token)
            in_first.append(token in first[k])
    if not target:
        raise ValueError("the second sentences hold no token to mask (all [UNK]?)")
    if condition == "without":
        inputs = monolingual_inputs(rows_second, [1] * len(rows_second))
        offset = [1] * len(target)
    else:
        inputs = tlm_inputs(rows_first, rows_second, cls_id=CLS, sep_id=SEP, pad_id=PAD)
        offset = [len(a) + 2 for a in rows_first]
    position = torch.tensor(offset) + torch.tensor(where)
    index = torch.arange(len(target))
    labels = torch.full_like(inputs["input_ids"], IGNORE_INDEX)
    labels[index, position] = inputs["input_ids"][index, position]
    inputs["input_ids"][index, position] = MASK
    return Blanks(inputs, labels, torch.tensor(pair), torch.tensor(target), torch.tensor(in_first))


@torch.no_grad()
def blank_predictions(model, blanks: Blanks, batch_size: int = 512, rows=None) -> torch.Tensor:
    """``model``'s top guess at each blank: one token id per row of ``blanks``, or per row of
    ``rows`` (a bool mask or indices: ``blank_predictions(m, b, rows=r)`` is
    ``blank_predictions(m, b)[r]``, without running the model on the other rows)."""
    model.eval()
    inputs, labels_all = blanks.inputs, blanks.labels
    if rows is not None:
        rows = torch.as_tensor(rows)
        inputs, labels_all = {k: v[rows] for k, v in inputs.items()}, labels_all[rows]
    guesses = []
    for start in range(0, len(labels_all), batch_size):
        part = slice(start, start + batch_size)
        batch = {k: v[part] for k, v in inputs.items()}
        labels = labels_all[part]
        hidden = model.bert(input_ids=batch["input_ids"], **_model_inputs(batch)).last_hidden_state
        guesses.append(model.cls(hidden[labels != IGNORE_INDEX]).argmax(-1))
    return torch.cat(guesses)


def blank_accuracy(model, blanks: Blanks, batch_size: int = 512) -> torch.Tensor:
    """Whether ``model``'s top guess at each blank is the hidden token (a bool tensor, one per row)."""
    return blank_predictions(model, blanks, batch_size) == blanks.target


@torch.no_grad()
def attention_to_first(model, blanks: Blanks, counterpart: dict | None = None) -> torch.Tensor:
    """Per layer, what the blanks of TLM-layout ``blanks`` pay attention to on the first side.

    Returns a ``(layers, 2)`` tensor: column 0 is the share of attention (mean over heads and blanks)
    on the first sentence's *words* (``[CLS]`` and ``[SEP]`` left out, since models park attention on
    them); column 1, over the blanks whose counterpart occurs in the first sentence, the share on
    it. The counterpart of a hidden token is the same token, or with ``counterpart`` (second-language
    id -> first-language id, e.g. :func:`bertfamily.lexicon.translations`) its translation. The model
    must compute attention weights (``attn_implementation="eager"``, as :func:`tiny_model` builds it).
    """
    inputs = blanks.inputs
    ids = inputs["input_ids"]
    out = model.bert(input_ids=ids, output_attentions=True, **_model_inputs(inputs))
    if not out.attentions or out.attentions[0] is None:
        raise ValueError("the model returned no attention weights: build it with attn_implementation='eager'")
    words = ~torch.isin(ids, torch.tensor([CLS, SEP, PAD]))
    first = (inputs["language_ids"] == 0) & (inputs["attention_mask"] == 1) & words
    if not first.any():
        raise ValueError("these blanks have no first sentence: use the 'with' or 'mismatched' condition")
    where = (ids == MASK).float().argmax(1)
    wanted = blanks.target if counterpart is None else torch.tensor(
        [counterpart.get(int(t), -1) for t in blanks.target], dtype=torch.long)
    copies = first & (ids == wanted[:, None])
    rows, shares = torch.arange(len(blanks)), []
    for layer in out.attentions:  # (rows, heads, queries, keys)
        weights = layer.mean(1)[rows, where]  # (rows, keys): what each blank looks at
        on_words = (weights * first).sum(1).mean()
        has_copy = copies.any(1)
        on_copies = (weights * copies).sum(1)[has_copy].mean() if has_copy.any() else torch.tensor(float("nan"))
        shares.append(torch.stack([on_words, on_copies]))
    return torch.stack(shares)


@torch.no_grad()
def blank_attention(model, blanks: Blanks, pair: int, layer: int = -1):
    """Attention from each blank of held-out pair ``pair`` to every token of its input.

    Returns ``(weights, token_ids, blank_positions)``: ``weights[r, k]`` is the attention (mean over
    heads, layer ``layer``) that the blank of the ``r``-th row of that pair pays to position ``k``;
    ``token_ids`` are the *unmasked* ids of the input (the hidden tokens put back), and
    ``blank_positions[r]`` is where row ``r``'s blank sits.
    """
    rows = (blanks.pair == pair).nonzero().flatten()
    if rows.numel() == 0:
        raise ValueError(f"pair {pair} has no blanks; pairs run from 0 to {int(blanks.pair.max())}")
    batch = {k: v[rows] for k, v in blanks.inputs.items()}
    out = model.bert(input_ids=batch["input_ids"], output_attentions=True, **_model_inputs(batch))
    if not out.attentions or out.attentions[layer] is None:
        raise ValueError("the model returned no attention weights: build it with attn_implementation='eager'")
    length = int(batch["attention_mask"][0].sum())
    where = (batch["input_ids"] == MASK).float().argmax(1)
    weights = out.attentions[layer].mean(1)[torch.arange(len(rows)), where, :length]
    token_ids = batch["input_ids"][0, :length].clone()
    token_ids[where] = blanks.labels[rows].max(1).values
    return weights, token_ids, where
