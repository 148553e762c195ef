"""How the course model and its students are scored on a set of fixed blanks: per blank the five best
guesses, the true piece, the loss, and whether the word was hidden or kept as it is."""

from __future__ import annotations

import torch


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
        ids, labels = held_out.input_ids[start : start + batch_size], held_out.labels[start : start + batch_size]
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
    return {
        group: {
            "top1": float(top1[rows].double().mean()),
            "top5": float(top5[rows].double().mean()),
            "loss": float(p["loss"][rows].double().mean()),
            "blanks": int(rows.sum()),
        }
        for group, rows in (("hidden", p["hidden"]), ("kept", ~p["hidden"]))
    }


def right_answers(model, held_out) -> str:
    """Per hidden blank of ``held_out`` (in :func:`blank_predictions`' order), ``"1"`` where the model's first
    guess is the word and ``"0"`` where not: what an article-level bootstrap resamples."""
    p = blank_predictions(model, held_out)
    right = (p["top5"][:, 0] == p["target"])[p["hidden"]]
    return "".join("1" if r else "0" for r in right.tolist())
