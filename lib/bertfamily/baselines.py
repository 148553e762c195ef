"""What a masked-language model must beat: guesses that need no network, on the same blanks.

* :func:`blank_kinds` sorts the blanks by what they hide: punctuation, a function word (a whole word on
  :data:`STOP_WORDS`: *the*, *of*, *with*, *which*), a content word (any other whole word of letters) or a
  number or piece of a word.
* :class:`Bigram` counts which piece follows which in the training blocks and guesses a blank from its
  two neighbours: ``P(w | left) * P(right | w)``, each an add-``smoothing`` mixture with word frequency
  (a neighbour that is itself a blank gives nothing, and only word frequency is left on that side).
* :func:`ladder` puts always-the-most-frequent-piece, word frequency, the bigram and any models side by
  side: top-1 and top-5 on each kind of hidden blank.

Every guess is over the same compact vocabulary as the course model, so the numbers compare directly.
"""

from __future__ import annotations

import torch

from .masking import IGNORE_INDEX

__all__ = ["KINDS", "STOP_WORDS", "blank_kinds", "Bigram", "top5_hits", "ladder", "most_frequent", "show_ladder"]

#: The kinds of blank, in the order the tables show them.
KINDS = ("punctuation", "function word", "content word", "number or piece")

#: The function words: NLTK's English stop-word list (``nltk.corpus.stopwords.words("english")``), its 153
#: entries without an apostrophe (WordPiece cuts *don't* into *don*, *'*, *t*, and those pieces are here).
#: It has no *said*, *would*, *also* or *year*: those count as content words.
STOP_WORDS = frozenset(
    """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
herself it its itself they them their theirs themselves what which who whom this that these those am is
are was were be been being have has had having do does did doing a an the and but if or because as until
while of at by for with about against between into through during before after above below to from up
down in out on off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very s t can will just don should now
d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn
weren won wouldn
""".split()
)


def blank_kinds(held_out, words, tokenizer) -> list[str]:
    """The kind (one of :data:`KINDS`) of every blank of ``held_out``, in the order of
    ``checkpoints.scores.blank_predictions`` (block by block, left to right)."""
    chosen = held_out.labels != IGNORE_INDEX
    original = torch.where(chosen, held_out.labels, held_out.input_ids)
    pieces = tokenizer.convert_ids_to_tokens(words.decode(original.flatten()).tolist())
    width = original.shape[1]
    kinds = []
    for flat in torch.nonzero(chosen.flatten()).flatten().tolist():
        piece = pieces[flat]
        after = pieces[flat + 1] if (flat + 1) % width else ""
        if not any(ch.isalnum() for ch in piece):
            kinds.append("punctuation")
        elif piece.startswith("##") or after.startswith("##") or not piece.isalpha():
            kinds.append("number or piece")
        else:
            kinds.append("function word" if piece in STOP_WORDS else "content word")
    return kinds


class Bigram:
    """A two-sided bigram guesser fitted on ``train`` blocks of compact ids (see the module)."""

    def __init__(self, train: torch.Tensor, vocab_size: int, *, special_ids=(), smoothing: float = 1.0):
        if not smoothing > 0:
            raise ValueError(f"smoothing must be positive, got {smoothing!r}")
        train = torch.as_tensor(train, dtype=torch.long)
        self.size, self.smoothing = int(vocab_size), float(smoothing)
        counts = torch.bincount(train.flatten(), minlength=self.size).double()
        self.counts = counts
        unigram = counts.clone()
        unigram[list(special_ids)] = 0  # a blank never hides [CLS], [SEP] or [MASK]
        self.unigram = (unigram + 0.5) / (unigram + 0.5).sum()
        left, right = train[:, :-1].flatten(), train[:, 1:].flatten()
        self.follows = self._rows(left, right)  # row l: how often each piece follows l
        self.precedes = self._rows(right, left)  # row r: how often each piece comes before r

    def _rows(self, a, b):
        keys, n = torch.unique(a * self.size + b, return_counts=True)
        rows, cols = keys // self.size, keys % self.size
        start = torch.zeros(self.size + 1, dtype=torch.long)
        start[1:] = torch.cumsum(torch.bincount(rows, minlength=self.size), 0)
        return start, cols, n.double()

    def _dense(self, table, ids):
        start, cols, n = table
        begin, length = start[ids], start[ids + 1] - start[ids]
        row = torch.repeat_interleave(torch.arange(len(ids)), length)
        offset = torch.arange(int(length.sum())) - torch.repeat_interleave(torch.cumsum(length, 0) - length, length)
        at = torch.repeat_interleave(begin, length) + offset
        out = torch.zeros(len(ids), self.size, dtype=torch.float64)
        out[row, cols[at]] = n[at]
        return out

    @torch.no_grad()
    def scores(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """``log P(w | left) + log P(right | w)`` for every piece ``w`` (rows: blanks)."""
        k, u = self.smoothing, self.unigram
        p_left = (self._dense(self.follows, left) + k * u) / (self.counts[left, None] + k)
        # P(right | w): how often w comes before right, over how often w occurs at all
        p_right = (self._dense(self.precedes, right) + k * u[right, None]) / (self.counts[None] + k)
        return p_left.log() + p_right.log()

    @torch.no_grad()
    def top5(self, held_out, batch: int = 512) -> torch.Tensor:
        """The five best guesses for every blank of ``held_out`` (its order, as ``blank_predictions``)."""
        ids = held_out.input_ids
        rows, cols = torch.nonzero(held_out.labels != IGNORE_INDEX, as_tuple=True)
        left = ids[rows, (cols - 1).clamp(min=0)]
        right = ids[rows, (cols + 1).clamp(max=ids.shape[1] - 1)]
        # ranked as scores() ranks, without its logarithms: exp(scores) up to a factor per row,
        # (follows[l, w] + k u_w) * (precedes[r, w] + k u_r) / (counts_w + k)
        k, u = self.smoothing, self.unigram
        per_piece = 1.0 / (self.counts + k)
        out = []
        for i in range(0, len(rows), batch):
            l, r = left[i : i + batch], right[i : i + batch]
            before = self._dense(self.follows, l).add_(k * u)
            after = self._dense(self.precedes, r).add_(k * u[r, None]).mul_(per_piece)
            out.append(before.mul_(after).topk(5, dim=-1).indices)
        return torch.cat(out)


def top5_hits(top5: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per blank, ``(right first, right in the five)`` as a ``(blanks, 2)`` bool tensor."""
    hits = top5 == target[:, None]
    return torch.stack([hits[:, 0], hits.any(-1)], dim=1)


def ladder(guessers: dict, target: torch.Tensor, hidden: torch.Tensor, kinds: list[str]) -> dict:
    """``{name: {kind or "all": (top-1, top-5, blanks)}}`` on the hidden blanks, for ``guessers``
    mapping a name to its top-5 guesses per blank (``(blanks, 5)`` or ``(blanks,)`` for one guess)."""
    kind = torch.tensor([KINDS.index(k) for k in kinds])
    table = {}
    for name, guesses in guessers.items():
        guesses = guesses[:, None].expand(-1, 5) if guesses.dim() == 1 else guesses
        hits = top5_hits(guesses, target).double()
        row = {}
        for label, rows in (("all", hidden), *((k, hidden & (kind == i)) for i, k in enumerate(KINDS))):
            n = int(rows.sum())
            row[label] = (
                float(hits[rows, 0].mean()) if n else float("nan"),
                float(hits[rows, 1].mean()) if n else float("nan"),
                n,
            )
        table[name] = row
    return table


def most_frequent(counts: torch.Tensor, special_ids=(), k: int = 5) -> torch.Tensor:
    """The ``k`` most frequent pieces of the training blocks (``counts`` per compact id), specials left out."""
    counts = counts.clone()
    counts[list(special_ids)] = -1
    return counts.topk(k).indices


#: The table's column heads: short enough for five columns in the book's 75-character output column.
_HEADS = {
    "all": "all",
    "punctuation": "punctuation",
    "function word": "function",
    "content word": "content",
    "number or piece": "num/piece",
}


def show_ladder(table: dict, width: int = 12) -> None:
    """Print :func:`ladder`'s table: a row per guesser, ``top-1 / top-5`` (%) per kind of blank."""
    columns = ["all", *KINDS]
    name_width = max(map(len, table)) + 1
    print(" " * name_width + "".join(f"{_HEADS[c]:>{width}}" for c in columns))
    first = next(iter(table.values()))
    print(f"{'blanks':<{name_width}}" + "".join(f"{first[c][2]:>{width},}" for c in columns))
    for name, row in table.items():
        cells = (f"{100 * row[c][0]:.1f} / {100 * row[c][1]:.1f}" for c in columns)
        print(f"{name:<{name_width}}" + "".join(f"{cell:>{width}}" for cell in cells))
