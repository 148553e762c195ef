"""The course's own BERT, which lesson 1 shows filling blanks, lesson 2 distils and lesson 3 quantises: its
settings, data, model and training loop (which its students' distillation runs too), and loading it back."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .common import Experiment, Settings, halve, load_into, save, write_log
from .scores import blank_scores
from .showcases import SHOWCASE, showcase, showcase_guesses


@dataclass(frozen=True)
class CourseSettings(Settings):
    length: int  # pieces per block
    test_blocks_per_article: int
    min_count: int  # a piece seen fewer times is [UNK] (the compact vocabulary)
    hidden: int
    layers: int
    heads: int
    dropout: float  # on the hidden states
    attention_dropout: float
    batch: int
    lr: float
    warmup: int  # steps of linear warm-up
    decay: float  # the last share of the steps, over which the rate decays linearly
    final_lr_fraction: float  # to this fraction of lr
    steps: int
    eval_every: int
    seed: int
    held_out_seed: int  # the test blocks' fixed mask (the validation blocks': this + 1)
    autocast: str | None  # the matrix products' dtype (a torch dtype's name), or None for float32


#: The course's own BERT: 4 layers of width 256 (about 6.5M parameters) trained with RoBERTa's dynamic masking
#: and without next-sentence prediction on the BBC training articles, in 128-piece blocks of 128 (16K pieces
#: a step: half of BERT's 32K-piece batches, a sixtieth of RoBERTa's 8K x 512), the WordPiece pieces seen at least
#: ``min_count`` times. AdamW with a linear warm-up, a constant rate, and a linear decay to
#: ``final_lr_fraction`` over the last ``decay`` share of the steps; dropout on the hidden states only. The
#: matrix products run in bfloat16 (``autocast``; fast where the CPU has AMX or AVX-512 BF16, and exact
#: enough: the evaluations run in float32). Settings are chosen on the validation articles; the test
#: articles are scored once, at the end. Lesson 1 shows it filling blanks, lesson 2 distils it, lesson 3
#: quantises it.
COURSE = CourseSettings(
    length=128,
    test_blocks_per_article=2,
    min_count=3,
    hidden=256,
    layers=4,
    heads=4,
    dropout=0.1,
    attention_dropout=0.0,
    batch=128,
    lr=1e-3,
    warmup=500,
    decay=0.25,
    final_lr_fraction=0.1,
    steps=3600,
    eval_every=200,
    seed=0,
    held_out_seed=2026,
    autocast="bfloat16",
)


@dataclass
class CourseData:
    """What the course model trains and is measured on."""

    tokenizer: object  # bert-base-uncased's WordPiece tokenizer (all-MiniLM-L6-v2's copy)
    words: object  # pretraining.CompactVocabulary: WordPiece id <-> compact id
    train: torch.Tensor  # compact ids, (blocks, length): every training article cut into blocks
    test: torch.Tensor  # compact ids of the test articles' blocks
    held_out: object  # pretraining.HeldOut: the test blocks masked once (reported, scored at the end)
    small: dict  # vocab_size, mask_token_id, special_ids (compact ids)
    config: object  # the model's BertConfig
    counts: torch.Tensor  # how often each compact id occurs in the training blocks
    articles: int  # training articles
    validation: object = None  # pretraining.HeldOut on the validation articles' blocks (settings, curves)
    test_articles: object = None  # per test block, the index of its article (for article-level intervals)
    validation_articles: object = None
    train_articles: object = None  # per training block, the index of its article


def course_data(settings: CourseSettings = COURSE) -> CourseData:
    from bertfamily.data import bbc_split
    from bertfamily.models import minilm_tokenizer
    from bertfamily.pretraining import HeldOut, blocks_of_texts, compact_corpus, tiny_bert_config

    s = settings
    tokenizer, split = minilm_tokenizer(), bbc_split()
    n, most = s.length, s.test_blocks_per_article
    train_ids, train_articles = blocks_of_texts(tokenizer, split.train_texts, length=n)
    test_ids, test_articles = blocks_of_texts(tokenizer, split.test_texts, length=n, max_blocks_per_text=most)
    valid_ids, valid_articles = blocks_of_texts(tokenizer, split.validation_texts, n, most)
    words, train, test, small = compact_corpus(tokenizer, train_ids, test_ids, min_count=s.min_count)
    held_out = HeldOut.fixed_mask(test, seed=s.held_out_seed, **small)
    validation = HeldOut.fixed_mask(words.encode(valid_ids), seed=s.held_out_seed + 1, **small)
    config = tiny_bert_config(
        words.size, hidden=s.hidden, layers=s.layers, heads=s.heads, max_positions=s.length, dropout=s.dropout
    )
    # dropout on the attention weights costs 40% of a forward pass on CPU (a random draw per weight)
    config.attention_probs_dropout_prob = s.attention_dropout
    counts = torch.bincount(train.flatten(), minlength=words.size)
    return CourseData(
        tokenizer,
        words,
        train,
        test,
        held_out,
        small,
        config,
        counts,
        len(split.train_texts),
        validation,
        test_articles,
        valid_articles,
        train_articles,
    )


def autocast(loss, settings):
    """``loss`` run under ``settings.autocast`` (a torch dtype's name, or None for float32)."""
    if not settings.autocast:
        return loss

    def wrapped(*args, **kwargs):
        with torch.autocast("cpu", dtype=getattr(torch, settings.autocast)):
            return loss(*args, **kwargs)

    return wrapped


def learning_rate(step: int, settings=COURSE) -> float:
    """The course model's learning-rate factor at optimiser step ``step`` (0-based)."""
    s = settings
    warm = min(1.0, (step + 1) / s.warmup)
    start = s.steps * (1 - s.decay)
    if step < start:
        return warm
    return 1.0 - (1.0 - s.final_lr_fraction) * (step - start) / (s.steps - start)


def course_model(data: CourseData, seed: int | None = None, settings: CourseSettings = COURSE):
    """A fresh (untrained) course model, with ``settings.layers`` layers (the course model's 4, or
    lesson 2's 2-layer control)."""
    import copy

    from bertfamily.pretraining import tiny_bert

    config = copy.deepcopy(data.config)
    config.num_hidden_layers = settings.layers
    return tiny_bert(config, seed=settings.seed if seed is None else seed)


def train_course_model(
    data: CourseData,
    steps: int | None = None,
    settings: CourseSettings = COURSE,
    progress=True,
    on_evaluation=None,
    evaluate: bool = True,
    on_step=None,
):
    """Train the course model (or its first ``steps``): ``(model, log)``.

    ``log`` holds the training loss of every step and, every ``eval_every`` steps, the scores of
    :func:`~bertfamily.checkpoints.scores.blank_scores`; ``on_evaluation(model, log)`` is called after each
    evaluation (make pretrain stores the weights there, so a run cut short still leaves its last model).
    ``evaluate=False``: the training losses only (what the reproduction tests compare). ``on_step(model,
    step)`` is called after every optimiser step (``step`` from 1).
    """
    s = settings
    steps = steps or s.steps
    model = course_model(data, settings=s)
    log = course_loop(
        data,
        model,
        s,
        steps,
        {"train_loss": [], "evaluations": []},
        "course model",
        progress,
        on_evaluation,
        evaluate=evaluate,
        on_step=on_step,
    )
    model.eval()
    return model, log


def course_loop(
    data: CourseData,
    model,
    s,
    steps: int,
    log: dict,
    desc: str,
    progress,
    on_evaluation,
    loss=None,
    evaluate: bool = True,
    on_step=None,
) -> dict:
    """The course model's training loop, shared by its pretraining and its distillation: dynamic masks and
    batch order from a generator seeded ``s.seed``, AdamW with :func:`learning_rate`, the loss under
    :func:`autocast`, and ``blank_scores`` on the validation blanks into ``log`` every ``eval_every``
    steps (then ``on_evaluation(model, log)``)."""
    from bertfamily.masking import DynamicMasking
    from bertfamily.pretraining import masked_lm_loss, mlm_steps

    generator = torch.Generator().manual_seed(s.seed)
    masking = DynamicMasking(data.train, generator=generator, **data.small)
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=0.01, foreach=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate(step, s))

    def batch(rows, epoch):
        return (*masking(rows, epoch), {})

    def after(step):
        if on_step is not None:
            on_step(model, step)
        if evaluate and (step % s.eval_every == 0 or step == steps):
            log["evaluations"].append({"step": step, **blank_scores(model, data.validation)})
            model.train()
            if on_evaluation is not None:
                on_evaluation(model, log)

    torch.manual_seed(s.seed)  # dropout
    log["train_loss"], log["epochs"] = mlm_steps(
        model,
        optimizer,
        schedule,
        batch,
        sequences=len(masking),
        batch_size=s.batch,
        steps=steps,
        generator=generator,
        progress=progress,
        desc=desc,
        after_step=after,
        loss=autocast(loss or masked_lm_loss, s),
    )
    return log


def load_course_model(data: CourseData, settings: CourseSettings = COURSE):
    """The stored course model (float16 on disk), in eval mode."""
    return load_into(course_model(data, settings=settings), "course-model")


def train_and_store(data: CourseData, settings: CourseSettings, name: str, on_evaluation):
    """:func:`train_course_model` with ``settings``, its weights stored as ``name`` at every evaluation (then
    ``on_evaluation(model, log)``: a run cut short leaves its last model) and at the end, rounded to float16 as
    stored (so the scores that follow are those of the stored weights): ``(model, log)``."""

    def write(model, log):
        save(model, name)
        on_evaluation(model, log)

    model, log = train_course_model(data, settings=settings, on_evaluation=write)
    halve(model)  # the metrics of the weights as stored
    save(model, name)
    return model, log


def run_course(progress, record, settings: CourseSettings = COURSE) -> dict:
    """The course model; its weights and log are rewritten at every evaluation (a run cut short leaves
    its last model, and the log says how far it got). The curve is on the validation blanks; the test
    blanks are scored once, at the end."""
    s = settings
    data = course_data()
    start = time.perf_counter()
    result = {
        "settings": s.to_log(),
        "blanks": data.held_out.targets,
        "validation_blanks": data.validation.targets,
        "train_blocks": int(data.train.shape[0]),
        "test_blocks": int(data.test.shape[0]),
        "validation_blocks": int(data.validation.input_ids.shape[0]),
        "vocab_size": data.small["vocab_size"],
    }
    blanks = showcase(data)  # lesson 1's showcase blanks, answered at the start and at every evaluation
    result["showcase"] = {
        "settings": SHOWCASE.to_log(),
        "blanks": blanks,
        "steps": [0],
        "guesses": [showcase_guesses(course_model(data, settings=s), data, blanks)],
    }

    def write(model, log):
        last = log["evaluations"][-1]
        result["showcase"]["steps"].append(last["step"])
        result["showcase"]["guesses"].append(showcase_guesses(model, data, blanks))
        result.update(steps_done=last["step"], evaluations=log["evaluations"])
        record(result)
        progress(
            f"course model step {last['step']}: validation top-1 {100 * last['hidden']['top1']:.1f}%, "
            f"top-5 {100 * last['hidden']['top5']:.1f}% ({time.perf_counter() - start:.0f} s)"
        )

    model, log = train_and_store(data, s, "course-model", write)
    result.update(
        final=blank_scores(model, data.held_out),
        final_validation=blank_scores(model, data.validation),
        epochs=log["epochs"],
        first_losses=log["train_loss"][:10],
        train_loss=[round(x, 4) for x in log["train_loss"]],
    )
    return result


def rerun_showcase(progress, steps: list[int], machine) -> dict:
    """The start of the course model's run again (its settings and seed), stopped at ``max(steps)``: its
    top guesses at lesson 1's showcase blanks after each of ``steps`` (0: before training), for a model
    log that has none (``course.json`` from before the showcase was logged). Written to
    ``course-showcase.json`` (with ``machine()``, the machine's description) after each of ``steps``, so a
    run cut short keeps what it has."""
    data = course_data()
    blanks, start = showcase(data), time.perf_counter()
    result = {
        "settings": COURSE.to_log(),
        "showcase": SHOWCASE.to_log(),
        "blanks": blanks,
        "steps": [],
        "guesses": [],
        "seconds": [],
    }

    def record(model, step):
        if step not in steps:
            return
        result["steps"].append(step)
        result["guesses"].append(showcase_guesses(model, data, blanks))
        result["seconds"].append(round(time.perf_counter() - start, 1))
        result.update(machine=machine())
        write_log("course-showcase", result)
        progress(f"showcase at step {step} ({time.perf_counter() - start:.0f} s)")

    record(course_model(data), 0)
    train_course_model(data, steps=max(steps), evaluate=False, on_step=record, progress=False)
    return result


EXPERIMENT = Experiment("course", "1, 2, 3", COURSE, run_course, native=True)
