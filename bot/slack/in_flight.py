"""The Slack requests this web process is answering right now, so that background work on the
same event loop can let them go first.

Drawing a Home tab (`bot.home.tab`) is a stretch of CPU with no await in it; a click that
arrives meanwhile waits for it to end, at each of its own awaits again. The Home tab's
publisher draws a tab only once no request is in flight (waiting at most `YIELD_SECONDS`, so
that a steady stream of clicks does not hold the tabs back for good): a click waits behind at
most one tab, not one per Redis round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

YIELD_SECONDS = 0.1


class InFlight:
    def __init__(self) -> None:
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Around one request's handling."""
        self._count += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._count -= 1
            if self._count == 0:
                self._idle.set()

    def count(self) -> int:
        return self._count

    async def after_requests(self, most: float = YIELD_SECONDS) -> None:
        """Once no request is in flight, or `most` seconds passed."""
        if self._idle.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(most):
                await self._idle.wait()
