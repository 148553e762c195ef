"""The grader's own budget for reading one submission's code (the code reader, the typed-answer
fixpoint): time and size, so that no notebook keeps a class waiting. Past it, the row is flagged for
reading by hand and the class goes on (:class:`OverBudget` says what was passed)."""

from __future__ import annotations

import time

#: Seconds the grader spends reading one submission's code (an honest one takes well under one).
READ_SECONDS = 20.0
#: Characters of a submission's own code the grader reads (the exercise's solution: a few thousand;
#: the abstract syntax trees of this many take about 100 times as much memory).
READ_CHARACTERS = 1_000_000


class OverBudget(Exception):
    """The grader's reading of a submission passed its budget: the reason, for the row."""


class Budget:
    """A deadline and a size, asked by the reading's loops (:meth:`check`, :meth:`take`)."""

    def __init__(self, seconds: float | None = None, characters: int | None = None):
        self.seconds = READ_SECONDS if seconds is None else seconds
        self.characters = READ_CHARACTERS if characters is None else characters
        self.deadline, self.left = time.monotonic() + self.seconds, self.characters

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise OverBudget(f"the grader's reading of its code passed {self.seconds:g} s")

    def take(self, characters: int) -> None:
        self.left -= characters
        if self.left < 0:
            raise OverBudget(f"its code is more than {self.characters:,} characters, more than the grader reads")
        self.check()
