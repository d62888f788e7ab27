"""Watching one step of a run for a stop (`runtime.run_stopper`): once someone stops the run,
no tool starts, a tool already executing finishes (its outcome recorded), then the model call
in flight is cancelled."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from agents import RunResult

from runtime.run_store import Stopped
from runtime.tool_journal import JournalScope, journal_scope

# How often a working run looks for a stop: the model call in flight is cancelled within this.
STOP_POLL_SECONDS = 0.5

_E = TypeVar("_E", bound=BaseException)


async def run_until_stopped(step: Coroutine[Any, Any, RunResult], scope: JournalScope) -> RunResult:
    """Run `step` (one `Runner.run`) inside the journal scope; raise Stopped on a stop."""
    with journal_scope(scope):
        # The task copies the context now: the scope goes with it.
        runner = asyncio.ensure_future(step)
    try:
        while True:
            await asyncio.wait({runner}, timeout=STOP_POLL_SECONDS)
            if runner.done():
                return runner.result()
            mark = await scope.store.stop_mark(scope.lease.run_id)
            if mark is None:
                continue
            scope.in_flight.stopping = mark
            while scope.in_flight.count and not runner.done():
                await asyncio.wait({runner}, timeout=0.05)
            raise Stopped(scope.lease.run_id, mark)
    finally:
        if not runner.done():
            runner.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await runner


def caused_by(error: BaseException, kind: type[_E]) -> _E | None:
    """The SDK wraps what a tool invoker raises; a fence lost or a stop met inside is ours."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__
    return None
