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
from collections.abc import Awaitable, Callable
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
