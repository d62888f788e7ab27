"""What a process knows from Slack, kept in its own memory for as long as it may be trusted:
read again from Redis after that. It saves the Redis read a click would make for a person's
standing or a name this process looked up moments ago.

A person's standing is memoised only by the process that asked Slack, for the time it caches
the answer in Redis (`STANDING_TTL_SECONDS`): a change Slack reports is seen as soon as the
cache promises, never later. Names are only shown: they are memoised however they were found.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")

LIMIT = 10_000
"""Entries kept at most (a workspace's people and channels); the oldest are forgotten first."""


class Memo(Generic[V]):
    def __init__(
        self, seconds: float, *, limit: int = LIMIT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._seconds = seconds
        self._limit = limit
        self._clock = clock
        self._kept: dict[str, tuple[float, V]] = {}

    def get(self, key: str) -> V | None:
        found = self._kept.get(key)
        if found is None:
            return None
        until, value = found
        if self._clock() >= until:
            del self._kept[key]
            return None
        return value

    def put(self, key: str, value: V) -> None:
        self._kept.pop(key, None)
        if len(self._kept) >= self._limit:
            del self._kept[next(iter(self._kept))]  # the oldest written
        self._kept[key] = (self._clock() + self._seconds, value)
