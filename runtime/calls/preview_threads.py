"""The threads synchronous previews run on: a bounded set of their own.

A preview's arguments are the model's, so a preview can hang. A thread cannot be cancelled: one
that outlives its `PREVIEW_TIMEOUT_SECONDS` keeps running. On asyncio's default executor (six
threads on two cores) seven hung previews would hold every thread, and every later preview, and
each `getaddrinfo` of a new connection, would queue behind them. So previews get at most
`PREVIEW_THREADS` threads of their own, counted until their function really returns; when all
are busy a preview is not started at all, and its card says "no preview" at once.

The threads are daemons: a hung preview must not keep the worker from exiting on SIGTERM
(a `ThreadPoolExecutor` joins its threads at exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PREVIEW_THREADS = 4


class PreviewThreadsBusy(Exception):
    """Every preview thread is still busy (with previews that hang): this one is not started."""


@dataclass(kw_only=True)
class PreviewThreads:
    size: int = PREVIEW_THREADS
    _busy: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def busy(self) -> int:
        """Threads whose preview has not returned yet, timed out or not."""
        return self._busy

    async def run(self, function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        """`function(**kwargs)` on a thread of its own; raises `PreviewThreadsBusy` at once if
        `size` previews are still running. Cancelling the wait leaves the thread to finish."""
        with self._lock:
            if self._busy >= self.size:
                raise PreviewThreadsBusy
            self._busy += 1
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()  # the run's log context, as `to_thread` would

        def work() -> None:
            try:
                result, error = context.run(function, **kwargs), None
            except Exception as raised:  # noqa: BLE001 -- handed to the caller: "no preview"
                result, error = None, raised
            finally:
                with self._lock:
                    self._busy -= 1
            # RuntimeError: the loop closed while the preview ran; nobody waits for it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, outcome, result, error)

        threading.Thread(target=work, name="preview", daemon=True).start()
        return await outcome


def _settle(outcome: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if outcome.done():
        return  # its wait timed out (cancelled)
    if error is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(result)
