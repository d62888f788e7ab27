"""One read shared by every Home tab publish that can use it.

A change concerns up to every viewer at once (a call any member of a 200-person group may decide),
and each of their tabs shows a selection of the same thing: the open approvals, the live runs.
Each publish reading all of it again made a change cost viewers x open approvals commands. A
publish may use a read that began after it was asked for (the change it shows was in Redis by
then), so one read serves the whole fan-out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedRead(Generic[T]):
    def __init__(self, read: Callable[[], Awaitable[T]]) -> None:
        self._read = read
        self._started = float("-inf")
        self._reading: asyncio.Future[T] | None = None

    async def since(self, asked: float) -> T:
        """What a read begun at or after `asked` (`time.monotonic()`) found."""
        if self._reading is None or self._started < asked:
            self._started = time.monotonic()
            self._reading = asyncio.ensure_future(self._read())
            self._reading.add_done_callback(self._failed)
        # Shielded: one publish giving up does not cancel the read the others wait for.
        return await asyncio.shield(self._reading)

    def _failed(self, reading: asyncio.Future[T]) -> None:
        # A failed read is not reused: the next publish reads again.
        if reading is self._reading and (reading.cancelled() or reading.exception() is not None):
            self._reading = None


K = TypeVar("K", bound=Hashable)

KEEP_SECONDS = 30.0
"""How long a read of one key is kept for later publishes (a fan-out takes seconds)."""


class SharedReads(Generic[K, T]):
    """`SharedRead` per key, with the keys not read lately read together: `read` gets every key
    a publish lacks at once (one pipeline) and answers each it found."""

    def __init__(self, read: Callable[[list[K]], Awaitable[Mapping[K, T]]]) -> None:
        self._read = read
        self._reads: dict[K, tuple[float, asyncio.Future[Mapping[K, T]]]] = {}

    async def since(self, keys: Sequence[K], asked: float) -> dict[K, T]:
        """Per key of `keys`, what a read begun at or after `asked` found (absent: nothing)."""
        clock = time.monotonic()
        if len(self._reads) > 4096:
            self._reads = {
                k: read for k, read in self._reads.items() if clock - read[0] < KEEP_SECONDS
            }
        missing = [k for k in dict.fromkeys(keys) if self._started(k) < asked]
        if missing:
            reading = asyncio.ensure_future(self._read(missing))
            reading.add_done_callback(lambda done: self._failed(missing, done))
            for k in missing:
                self._reads[k] = (clock, reading)
        found: dict[K, T] = {}
        for k in keys:
            # Shielded: one publish giving up does not cancel the read the others wait for.
            answers = await asyncio.shield(self._reads[k][1])
            if k in answers:
                found[k] = answers[k]
        return found

    def _started(self, key: K) -> float:
        read = self._reads.get(key)
        return read[0] if read is not None else float("-inf")

    def _failed(self, keys: list[K], reading: asyncio.Future[Mapping[K, T]]) -> None:
        if reading.cancelled() or reading.exception() is not None:
            for k in keys:
                if self._reads.get(k, (0.0, None))[1] is reading:
                    del self._reads[k]
