"""How long to wait before trying again something that keeps failing (Redis away, Slack not
answering): twice as long after each failure, up to a cap, and from the start after a success.

Every retry loop of both processes uses this one, so that an outage gives one log line per
attempt at the same pace everywhere, never one a second per loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Backoff:
    first: float
    cap: float
    _next: float = field(init=False)

    def __post_init__(self) -> None:
        self._next = min(self.first, self.cap)

    @property
    def delay(self) -> float:
        """The wait the next failure gets (for a log line said before it)."""
        return self._next

    def failed(self) -> float:
        """The wait before the next try, after one more failure; the one after is doubled."""
        delay = self._next
        self._next = min(self._next * 2, self.cap)
        return delay

    def succeeded(self) -> None:
        """The next failure waits `first` again."""
        self._next = min(self.first, self.cap)
