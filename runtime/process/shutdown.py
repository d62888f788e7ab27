"""The shutdown signal every waiting loop shares: a sleep that wakes as soon as stop is asked.

A plain `asyncio.sleep` in a loop would hold a SIGTERM up for a whole interval; each loop of the
worker (the job reader, the due-set pollers, the audit trimmer) sleeps through `Shutdown.sleep`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

_T = TypeVar("_T")


class Shutdown:
    """Set once, on shutdown; never cleared."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()

    async def sleep(self, seconds: float) -> bool:
        """Wait `seconds`, or less if stopping; True if stopping."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._event.wait()
        return self._event.is_set()

    async def unless_stopped(self, work: Awaitable[_T]) -> _T | None:
        """`work`'s result, or None once stopping (`work` is then cancelled): a blocking Redis
        read must not hold a SIGTERM up for its whole timeout."""
        task = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The caller is cancelled (a sibling in its task group failed, say): the work goes
            # with it, and how it ends is nobody's business, not an "exception never retrieved".
            task.cancel()
            task.add_done_callback(_forget)
            raise
        finally:
            stopped.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None


def _forget(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
