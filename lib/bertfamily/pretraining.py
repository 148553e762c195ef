"""A tiny masked-language-model toolkit: small enough to pretrain a BERT from scratch on a laptop CPU.

* :func:`token_blocks` cuts tokenised articles into ``[CLS] ... [SEP]`` blocks of one length
  (:func:`blocks_of_texts`: with each block's article).
* :class:`CompactVocabulary` renumbers the ids that actually occur (a few thousand of the
  30,522 WordPiece entries) so the output layer stays small; the rest map to ``[UNK]``.
* :func:`tiny_bert_config` / :func:`tiny_bert` build a small ``BertForMaskedLM``.
* :func:`masked_lm_loss` applies the prediction head only at the masked positions (the other
  85% of the logits are never needed), and returns the loss and the number of correct guesses.
* :func:`train_mlm` trains on any masking schedule (``masking(rows, epoch) -> (ids, labels)``,
  see :mod:`bertfamily.masking`) with AdamW, a ``torch.Generator`` for the order, ``tqdm``
  progress, and a held-out evaluation every few steps; its loop, :func:`mlm_steps`, is the course's
  one masked-LM training loop (``tlm.train_pairs`` runs it too).
* :class:`HeldOut` and :func:`evaluate_mlm`: masked-LM loss and accuracy under one fixed mask,
  the same for every model compared.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
import transformers
from tqdm.auto import tqdm

from .masking import IGNORE_INDEX, as_batch, mask_tokens

__all__ = ["token_blocks", "blocks_of_texts", "CompactVocabulary", "compact_corpus", "tiny_bert_config", "tiny_bert",
           "masked_lm_loss", "HeldOut", "unigram_baseline", "evaluate_mlm", "train_mlm", "mlm_steps", "History"]


# --------------------------------------------------------------------------- data

def token_blocks(tokenizer, texts: Sequence[str], length: int = 64,
                 max_blocks_per_text: int | None = None) -> torch.Tensor:
    """Cut each text into consecutive ``[CLS] w1 ... w_{length-2} [SEP]`` blocks (no padding).

    A text's last incomplete piece is dropped; ``max_blocks_per_text`` keeps only the first blocks
    of each text. Returns a ``(blocks, length)`` long tensor of the tokenizer's ids.
    """
    return blocks_of_texts(tokenizer, texts, length, max_blocks_per_text)[0]


def blocks_of_texts(tokenizer, texts: Sequence[str], length: int = 64,
                    max_blocks_per_text: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`token_blocks` and, per block, the index of its text in ``texts`` (one tokenisation for both)."""
    if not isinstance(length, int) or length < 3:
        raise ValueError(f"length must be an integer >= 3 ([CLS] + a token + [SEP]), got {length!r}")
    if max_blocks_per_text is not None and (not isinstance(max_blocks_per_text, int) or max_blocks_per_text < 1):
        raise ValueError(f"max_blocks_per_text must be a positive integer or None, got {max_blocks_per_text!r}")
    if len(texts) == 0:
        raise ValueError("texts is empty: give at least one text")
    body = length - 2
    blocks, of_text = [], []
    # verbose=False: a whole article is longer than the model's 512 positions, which is why we cut it
    for text, ids in enumerate(tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]):
        pieces = [ids[i:i + body] for i in range(0, len(ids) - body + 1, body)]
        for piece in pieces[:max_blocks_per_text]:
            blocks.append([tokenizer.cls_token_id, *piece, tokenizer.sep_token_id])
            of_text.append(text)
    if not blocks:
        raise ValueError(f"no text has {body} tokens: shorten length or give longer texts")
    return torch.tensor(blocks, dtype=torch.long), torch.tensor(of_text, dtype=torch.long)


class CompactVocabulary:
    """Renumber the ids that occur in ``input_ids`` as 0..n-1 (``keep`` ids first, in order).

    Ids seen fewer than ``min_count`` times, and ids never seen, map to ``unk_id``'s new id.
    ``encode`` maps original ids to compact ones and ``decode`` maps back; ``size`` is the new
    vocabulary size, to give to :func:`tiny_bert_config`.
    """

    def __init__(self, input_ids, *, keep: Sequence[int], unk_id: int, min_count: int = 1):
        ids = as_batch(input_ids)
        if unk_id not in keep:
            keep = (*keep, unk_id)
        if len(set(keep)) != len(keep):
            raise ValueError(f"keep must not repeat ids, got {list(keep)}")
        counts = Counter(ids.flatten().tolist())
        frequent = sorted((i for i, c in counts.items() if c >= min_count and i not in keep),
                          key=lambda i: (-counts[i], i))
        self.original_ids = torch.tensor([*keep, *frequent], dtype=torch.long)
        table_size = max(int(ids.max()), *keep) + 1
        self.table = torch.full((table_size,), list(keep).index(unk_id), dtype=torch.long)
        self.table[self.original_ids] = torch.arange(len(self.original_ids))
        self.unk = int(self.table[unk_id])

    @property
    def size(self) -> int:
        return len(self.original_ids)

    def __call__(self, original_id: int) -> int:
        """The compact id of one original id."""
        return int(self.encode(torch.tensor([original_id]))[0])

    def encode(self, input_ids) -> torch.Tensor:
        ids = torch.as_tensor(input_ids, dtype=torch.long)
        out = torch.full_like(ids, self.unk)
        inside = ids < len(self.table)
        out[inside] = self.table[ids[inside]]
        return out

    def decode(self, compact_ids) -> torch.Tensor:
        return self.original_ids[torch.as_tensor(compact_ids, dtype=torch.long)]


def compact_corpus(tokenizer, train_ids, test_ids, min_count: int = 1):
    """The :class:`CompactVocabulary` of ``train_ids`` (the tokenizer's special pieces first), both sets
    in it, and the masking arguments in compact ids: ``(words, train, test, small)``, where ``small``
    holds ``vocab_size``, ``mask_token_id`` and ``special_ids`` for :mod:`bertfamily.masking`."""
    keep = [tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id,
            tokenizer.mask_token_id]
    words = CompactVocabulary(train_ids, keep=keep, unk_id=tokenizer.unk_token_id, min_count=min_count)
    small = dict(vocab_size=words.size, mask_token_id=words(tokenizer.mask_token_id),
                 special_ids=[words(i) for i in keep])
    return words, words.encode(train_ids), words.encode(test_ids), small


# --------------------------------------------------------------------------- model

def tiny_bert_config(vocab_size: int, *, hidden: int = 64, layers: int = 2, heads: int = 2,
                     intermediate: int | None = None, max_positions: int = 64, type_vocab_size: int = 1,
                     dropout: float = 0.0, pad_token_id: int = 0) -> transformers.BertConfig:
    """A small ``BertConfig`` (defaults: 2 layers, H 64, 2 heads, I = 4H, 64 positions, no dropout)."""
    for name, value in (("vocab_size", vocab_size), ("hidden", hidden), ("layers", layers),
                        ("heads", heads), ("max_positions", max_positions),
                        ("type_vocab_size", type_vocab_size)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
    return transformers.BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=intermediate or 4 * hidden, max_position_embeddings=max_positions,
        type_vocab_size=type_vocab_size, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout, pad_token_id=pad_token_id)


def tiny_bert(config: transformers.BertConfig, seed: int = 0) -> transformers.BertForMaskedLM:
    """A freshly initialised ``BertForMaskedLM``; the same ``seed`` gives the same weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.BertForMaskedLM(config)
    return model


def masked_lm_loss(model, input_ids, labels, attention_mask=None, **model_inputs):
    """Cross-entropy at the labelled positions only; returns ``(mean loss, correct, count)``.

    Runs the encoder on the whole batch but the prediction head (hidden -> vocabulary) only where
    ``labels != -100``, which saves most of the output layer's work. ``model_inputs`` go to the
    encoder as they are (``token_type_ids``, ``position_ids``).
    """
    hidden = model.bert(input_ids=input_ids, attention_mask=attention_mask, **model_inputs).last_hidden_state
    chosen = labels != IGNORE_INDEX
    targets = labels[chosen]
    if targets.numel() == 0:
        zero = hidden.sum() * 0.0
        return zero, 0, 0
    logits = model.cls(hidden[chosen])
    loss = F.cross_entropy(logits, targets)
    correct = int((logits.argmax(-1) == targets).sum())
    return loss, correct, int(targets.numel())


# --------------------------------------------------------------------------- evaluation

@dataclass
class HeldOut:
    """Sequences corrupted once with a fixed mask, so every model is scored on the same blanks.

    ``model_inputs`` holds further per-row tensors for the encoder, such as ``token_type_ids`` or
    ``position_ids`` (the language ids and positions of :func:`bertfamily.masking.tlm_inputs`).
    """
    input_ids: torch.Tensor
    labels: torch.Tensor
    attention_mask: torch.Tensor | None = None
    model_inputs: dict = field(default_factory=dict)

    @classmethod
    def fixed_mask(cls, input_ids, *, seed: int = 0, attention_mask=None, model_inputs=None,
                   **mask_kwargs) -> HeldOut:
        """Mask ``input_ids`` once with a generator seeded ``seed`` (``mask_kwargs`` go to mask_tokens)."""
        ids = as_batch(input_ids)
        corrupted, labels = mask_tokens(ids, generator=torch.Generator().manual_seed(seed),
                                        attention_mask=attention_mask, **mask_kwargs)
        return cls(corrupted, labels, attention_mask, dict(model_inputs or {}))

    @property
    def targets(self) -> int:
        return int((self.labels != IGNORE_INDEX).sum())


def unigram_baseline(train_ids, held_out: HeldOut, *, vocab_size: int, special_ids) -> tuple[float, float]:
    """What word frequencies alone achieve on ``held_out``'s blanks: ``(loss, accuracy)``.

    The loss (nats per blank) of the training text's unigram distribution, add-one smoothed over the
    ``vocab_size`` entries (special tokens excluded), and the accuracy of always guessing its most
    frequent word piece.
    """
    counts = torch.bincount(as_batch(train_ids).flatten(), minlength=vocab_size).double() + 1
    counts[list(special_ids)] = 0
    targets = held_out.labels[held_out.labels != IGNORE_INDEX]
    loss = float(-(counts / counts.sum()).log()[targets].mean())
    return loss, float((targets == counts.argmax()).double().mean())


@torch.no_grad()
def evaluate_mlm(model, data, batch_size: int = 256) -> dict:
    """Masked-LM loss (mean over blanks, nats) and accuracy of ``model`` on ``data``.

    ``data`` is a :class:`HeldOut` or an ``(input_ids, labels)`` pair. The model is put in eval
    mode and restored to the mode it was in.
    """
    if isinstance(data, tuple):
        data = HeldOut(*data)
    was_training = model.training
    model.eval()
    total, correct, count = 0.0, 0, 0
    for start in range(0, data.input_ids.shape[0], batch_size):
        part = slice(start, start + batch_size)
        mask = None if data.attention_mask is None else data.attention_mask[part]
        extra = {key: value[part] for key, value in data.model_inputs.items()}
        loss, right, n = masked_lm_loss(model, data.input_ids[part], data.labels[part], mask, **extra)
        total += float(loss) * n
        correct += right
        count += n
    model.train(was_training)
    if count == 0:
        raise ValueError("the evaluation data has no masked positions")
    return {"loss": total / count, "accuracy": correct / count, "targets": count}


# --------------------------------------------------------------------------- training

@dataclass
class History:
    """What :func:`train_mlm` records: the training loss of every step and the evaluations."""
    train_loss: list = field(default_factory=list)
    eval_steps: list = field(default_factory=list)
    eval_loss: list = field(default_factory=list)
    eval_accuracy: list = field(default_factory=list)
    epochs: int = 0


def train_mlm(model, masking: Callable, *, steps: int, batch_size: int = 32, lr: float = 1e-3,
              weight_decay: float = 0.01, warmup: int = 0, generator: torch.Generator | None = None,
              held_out: HeldOut | None = None, eval_every: int = 50, progress: bool = True,
              desc: str = "pretraining", loss: Callable | None = None) -> History:
    """Train ``model`` for ``steps`` optimiser steps on the batches a masking schedule serves.

    ``masking(rows, epoch)`` returns ``(corrupted_ids, labels)`` for the rows of its data (a
    :class:`~bertfamily.masking.StaticMasking` or :class:`~bertfamily.masking.DynamicMasking`), or
    ``(corrupted_ids, labels, model_inputs)`` where ``model_inputs`` is a dict of further encoder
    inputs for those rows (``attention_mask``, ``token_type_ids``, ``position_ids``);
    ``len(masking)`` is the number of sequences. Each epoch visits every sequence once in an order
    drawn from ``generator``; a last incomplete batch is dropped. AdamW at ``lr`` with a linear
    warm-up over ``warmup`` steps, then constant. With ``held_out``, the held-out loss and accuracy
    are recorded every ``eval_every`` steps and after the last. ``loss`` replaces the masked-LM loss
    (see :func:`mlm_steps`; distillation passes its triple loss); the evaluation stays masked-LM.
    """
    check_steps(steps, batch_size, len(masking), "sequences")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0)
    history = History()

    def evaluate(step):
        result = evaluate_mlm(model, held_out)
        history.eval_steps.append(step)
        history.eval_loss.append(result["loss"])
        history.eval_accuracy.append(result["accuracy"])

    def batch(rows, epoch):
        input_ids, labels, *extra = masking(rows, epoch)
        return input_ids, labels, (extra[0] if extra else {})

    def after(step):
        if held_out is not None and step % eval_every == 0:
            evaluate(step)

    history.train_loss, epochs = mlm_steps(model, optimizer, schedule, batch, sequences=len(masking),
                                           batch_size=batch_size, steps=steps, generator=generator,
                                           progress=progress, desc=desc, after_step=after, loss=loss)
    if held_out is not None and (not history.eval_steps or history.eval_steps[-1] != steps):
        evaluate(steps)
    history.epochs = epochs
    model.eval()
    return history


def check_steps(steps, batch_size, sequences: int, what: str) -> None:
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if not isinstance(batch_size, int) or not 1 <= batch_size <= sequences:
        raise ValueError(f"batch_size must be between 1 and the {sequences} {what}, got {batch_size!r}")


def mlm_steps(model, optimizer, schedule, batch: Callable, *, sequences: int, batch_size: int, steps: int,
              generator: torch.Generator | None = None, progress: bool = True, desc: str = "pretraining",
              after_step: Callable | None = None, loss: Callable | None = None) -> tuple[list[float], int]:
    """The course's one masked-LM training loop (:func:`train_mlm` and ``tlm.train_pairs`` run it).

    Each epoch visits the ``sequences`` rows once, in an order drawn from ``generator``
    (``torch.randperm``), ``batch_size`` rows a step (a last incomplete batch is dropped);
    ``batch(rows, epoch)`` returns ``(input_ids, labels, model_inputs)`` for a step's rows (a long
    tensor of row indices), and ``loss(model, input_ids, labels, **model_inputs)`` scores it (default
    :func:`masked_lm_loss`; its first value is the loss to minimise). One optimiser step and one
    ``schedule`` step per batch; ``after_step(step)`` is called after step ``1, 2, ...``. The caller
    chooses the optimiser and the schedule. Returns the training loss of every step and the number
    of epochs begun.
    """
    per_epoch = sequences // batch_size
    score = masked_lm_loss if loss is None else loss
    losses, order, epoch = [], None, -1
    model.train()
    for step in tqdm(range(steps), desc=desc, disable=not progress, leave=False):
        if step % per_epoch == 0:
            epoch += 1
            order = torch.randperm(sequences, generator=generator)
        rows = order[(step % per_epoch) * batch_size:(step % per_epoch + 1) * batch_size]
        input_ids, labels, model_inputs = batch(rows, epoch)
        value = score(model, input_ids, labels, **model_inputs)[0]
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        schedule.step()
        losses.append(value.item())
        if after_step is not None:
            after_step(step + 1)
    return losses, epoch + 1


# --------------------------------------------------------------------------- lesson 1's runs

SCHEMES = {"static": 1, "static x10": 10, "dynamic": None}  # copies of the masks: None is dynamic


def masking_run(job: tuple) -> dict:
    """One run of lesson 1's comparison, on one thread: ``job`` is ``(scheme, seed, train, config,
    small, held_out, blanks, options)``. A :func:`tiny_bert` from ``seed`` trained by :func:`train_mlm`
    (``options``) on ``train`` masked by the scheme (:data:`SCHEMES`), then scored on the masks it
    saw last (``own``) and on each of ``blanks``. Returns ``{"history": ..., "own": ..., **blanks}``.
    (Shown in lesson 1: its lines fit the page's 75 columns.)"""
    from .masking import DynamicMasking, StaticMasking
    from .timing import threads

    name, seed, train, config, small, held_out, blanks, options = job
    if name not in SCHEMES:
        raise ValueError(f"scheme must be one of {list(SCHEMES)}")
    with threads(1):  # tiny matrices: runs side by side beat threads
        g = torch.Generator().manual_seed(seed)
        copies = SCHEMES[name]
        if copies:
            scheme = StaticMasking(train, copies=copies, generator=g,
                                   **small)
        else:
            scheme = DynamicMasking(train, generator=g, **small)
        model = tiny_bert(config, seed=seed)
        history = train_mlm(model, scheme, generator=g,
                            held_out=held_out, **options)
        last = history.epochs - 1
        seen = scheme(torch.arange(len(scheme)), last)  # its last masks
        scored = {"own": seen, **blanks}
        scores = {k: evaluate_mlm(model, b) for k, b in scored.items()}
        return {"history": history, **scores}
