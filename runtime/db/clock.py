"""Redis's clock as last told by a script, carried forward on this process's monotonic clock.

Deadlines and reminders are set and checked on Redis's clock alone (the workers' clocks may
disagree). A step that opens approvals needs "now" to plan them; the script that created or
resumed the run has just read `TIME`, so its reply carries it and the step does not ask again.
The error is the reply's one-way trip, milliseconds against deadlines of minutes.

`LATEST` holds the last reading any clock of this process took, for what must be stamped with
Redis's time but cannot wait for it (an audit entry built for a script to append): carried
forward however old, its error is the local clock's rate error (parts per million), not its
offset, which may be minutes.
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis

FRESH_SECONDS = 10.0
"""How long a reading is carried forward before `TIME` is asked again (drift stays tiny)."""


class RedisClock:
    def __init__(self) -> None:
        self._redis_at = 0.0
        self._local_at: float | None = None

    def saw(self, seconds: bytes | str | int, micros: bytes | str | int) -> None:
        """A `TIME` reading (its two parts, as a script returns them), taken just now."""
        self._redis_at = int(seconds) + int(micros) / 1_000_000
        self._local_at = time.monotonic()
        if self is not LATEST:
            LATEST.saw(seconds, micros)

    def carried(self) -> float | None:
        """Redis's time now, carried forward from the last reading however old; None before
        the first."""
        if self._local_at is None:
            return None
        return self._redis_at + time.monotonic() - self._local_at

    def now(self) -> float | None:
        """Redis's time now, if a recent reading says; None otherwise."""
        if self._local_at is None:
            return None
        elapsed = time.monotonic() - self._local_at
        if elapsed > FRESH_SECONDS:
            return None
        return self._redis_at + elapsed

    async def read(self, redis: aioredis.Redis) -> float:
        """Redis's time now: carried forward from a recent reading, else asked (`TIME`)."""
        known = self.now()
        if known is not None:
            return known
        seconds, micros = await redis.time()
        self.saw(seconds, micros)
        return seconds + micros / 1_000_000


LATEST = RedisClock()
"""The last reading of Redis's clock that any `RedisClock` of this process took."""


def stamp() -> float:
    """Redis's time now for a record that cannot wait for a reading (`LATEST`, carried forward);
    this process's own clock only before the process ever read Redis's."""
    carried = LATEST.carried()
    return time.time() if carried is None else carried
