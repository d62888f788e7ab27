"""The model's text of one stretch of a run, as it is produced, for a reporter that shows it
(`runtime.reporter.Activity.text`).

`runtime.models.journaled` feeds it, for the model calls of the run itself (not those of an
agent tool's inner run): each attempt at a response `began`, its `delta`s, and how it `ended`.
A failed attempt's text is withdrawn (the runner asks again, `runtime.models.retries`): what
is shown is the text of the responses answered so far, then the current attempt's, never a
failed attempt's twice. A replayed (journaled) response is one attempt, all its text at once.

The stretch's observer (`runtime.runs.observer`) listens to it: `listening` makes it the text
of the model calls made in the block (a context variable, so the round's SDK tasks see it),
and `on_change` wakes the observer's pacing, which sends it at most once a second.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

TEXT_KEPT = 100_000
"""Characters of a stretch's text kept in memory; past them the rest is not shown as it comes
(a streamed message holds 12,000; the answer is posted whole at the end in any case)."""


class ModelText:
    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self._answered = ""
        self._attempt = ""
        self._on_change = on_change
        self.withdrawn = 0
        """How many times text already produced was withdrawn (a failed attempt's)."""

    @property
    def shown(self) -> str:
        return self._answered + self._attempt

    def began(self) -> None:
        """An attempt at a response starts: a failed attempt's text before it is withdrawn."""
        if self._attempt:
            self._attempt = ""
            self.withdrawn += 1
            self._on_change()

    def delta(self, text: str) -> None:
        room = TEXT_KEPT - len(self._answered) - len(self._attempt)
        if not text or room <= 0:
            return
        if not self._attempt and self._answered and not self._answered.endswith("\n"):
            text = "\n\n" + text  # each response's text a paragraph of its own
        self._attempt += text[:room]
        self._on_change()

    def ended(self, *, answered: bool) -> None:
        """The attempt answered (its text stays) or failed (its text is withdrawn)."""
        if answered:
            self._answered += self._attempt
            self._attempt = ""
        else:
            self.began()


_TEXT: contextvars.ContextVar[ModelText | None] = contextvars.ContextVar(
    "countersign_model_text", default=None
)


@contextlib.contextmanager
def listening(text: ModelText | None) -> Iterator[None]:
    """Model calls made in this block tell `text` what they produce (None: nobody listens)."""
    token = _TEXT.set(text)
    try:
        yield
    finally:
        _TEXT.reset(token)


def current_text() -> ModelText | None:
    return _TEXT.get()
