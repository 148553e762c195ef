"""Lesson 1's two showcases of test blanks, each answered by the course model: ``hard``, content words of
four letters or more spread evenly over the test articles (:func:`bertfamily.fill.showcase_blanks`), and
``random``, blanks of any kind drawn at random (:func:`bertfamily.fill.random_blanks`). ``make pretrain``
logs the model's top guesses there at every evaluation."""

from __future__ import annotations

from dataclasses import dataclass

from .common import Settings


@dataclass(frozen=True)
class ShowcaseSettings(Settings):
    count: int  # blanks in each showcase
    min_letters: int  # a hard blank's word has at least this many letters
    random_seed: int  # draws the random showcase
    guesses: int  # top guesses logged per blank


SHOWCASE = ShowcaseSettings(count=10, min_letters=4, random_seed=0, guesses=3)


def showcase(data, settings: ShowcaseSettings = SHOWCASE) -> dict:
    """``{"hard": [(block, position), ...], "random": [...]}``: the blanks of :data:`SHOWCASE` in
    ``data.held_out`` (the test blocks of a ``course.CourseData``)."""
    from bertfamily import baselines, fill

    s, where = settings, (data.held_out, data.words, data.tokenizer, data.test_articles)
    return {
        "hard": fill.showcase_blanks(*where, count=s.count, min_letters=s.min_letters, stop_words=baselines.STOP_WORDS),
        "random": fill.random_blanks(*where, count=s.count, seed=s.random_seed),
    }


def showcase_guesses(model, data, blanks: dict, settings: ShowcaseSettings = SHOWCASE) -> dict:
    """The model's best ``settings.guesses`` pieces (with probabilities) at each showcase blank."""
    from bertfamily import fill

    return {
        name: fill.guesses_at(model, data.held_out, chosen, data.words, data.tokenizer, settings.guesses)
        for name, chosen in blanks.items()
    }
