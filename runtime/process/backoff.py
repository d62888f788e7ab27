"""How long to wait before trying again something that keeps failing (Redis away, Slack not
answering): a wait drawn at random under a ceiling that doubles after each failure, up to a cap,
and from the start after a success.

The draw is redis-py's `EqualJitterBackoff` (`redis.backoff`, beside the
`ExponentialWithJitterBackoff` its clients retry commands with): between half the ceiling and
the ceiling. The jitter spreads out the processes that lost the same server, so they do not all
ask it again at the same moment; the half kept keeps the pace of the log lines, where a full
jitter could draw a wait near zero and retry at once.

Every retry loop of both processes uses this one, so that an outage gives one log line per
attempt at the same pace everywhere, never one a second per loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.backoff import EqualJitterBackoff

_MAX_DOUBLINGS = 64
"""Failures counted past this raise the ceiling no further (it is at the cap long before)."""


@dataclass
class Backoff:
    first: float
    """The ceiling of the first wait."""
    cap: float
    """No wait is longer."""
    _draws: EqualJitterBackoff = field(init=False)
    _failures: int = field(init=False, default=0)
    _next: float = field(init=False)

    def __post_init__(self) -> None:
        self._draws = EqualJitterBackoff(cap=self.cap, base=self.first)
        self.succeeded()

    @property
    def delay(self) -> float:
        """The wait the next failure gets (for a log line said before it)."""
        return self._next

    @property
    def ceiling(self) -> float:
        """The longest wait the next failure can get; the next draw is at least half of it."""
        return min(self.cap, self.first * 2.0 ** min(self._failures, _MAX_DOUBLINGS))

    def failed(self) -> float:
        """The wait before the next try, after one more failure; the next one's ceiling doubles."""
        delay = self._next
        self._failures = min(self._failures + 1, _MAX_DOUBLINGS)
        self._next = self._draw()
        return delay

    def succeeded(self) -> None:
        """The next failure waits as the first did."""
        self._failures = 0
        self._next = self._draw()

    def _draw(self) -> float:
        return self._draws.compute(self._failures)
