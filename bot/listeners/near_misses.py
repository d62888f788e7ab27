"""Which command word a one-word task was probably meant to be.

Without this, `/agent stp`, `/agent stauts` or `/agent grant` started an agent run with that
word as its task. A one-word task within `MAX_EDITS` edits of a command word (a letter added,
left out or changed, or two neighbours swapped: "hlep" is one edit from "help") is asked about
instead (`bot.listeners.commands`), with a button for the rare real one-word task.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_EDITS = 2
SHORTEST = 3
"""Words shorter than this are not taken for a command: any two letters are two edits from
"stop" ("to", "so")."""


def edits(typed: str, word: str) -> int:
    """The fewest single-letter insertions, deletions, substitutions and swaps of neighbours
    that turn `typed` into `word` (the optimal string alignment distance)."""
    rows = [list(range(len(word) + 1))]
    for i, a in enumerate(typed, 1):
        row = [i]
        for j, b in enumerate(word, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (a != b))
            if i > 1 and j > 1 and a == word[j - 2] and typed[i - 2] == b:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def nearest(typed: str, words: Iterable[str]) -> str | None:
    """The word of `words` that `typed` is closest to, if within `MAX_EDITS` (ties: the first
    listed); None for a word too short or too far from all of them."""
    typed = typed.lower()
    if len(typed) < SHORTEST:
        return None
    scored = [(edits(typed, word), index, word) for index, word in enumerate(words)]
    best = min(scored, default=None)
    return best[2] if best is not None and best[0] <= MAX_EDITS else None
