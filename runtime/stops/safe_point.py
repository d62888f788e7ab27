"""Stopping one step of a run at its next safe point (`runtime.stops.stopper`): once someone
stops the run, no tool starts, a tool already executing finishes (its outcome recorded), then
the model call in flight is cancelled. The worker's `StopListener` says when to look."""

from __future__ import annotations

import asyncio
import contextlib
from asyncio import FIRST_COMPLETED
from collections.abc import Coroutine
from typing import Any

from agents import RunResult
from redis.exceptions import RedisError

from runtime.journal.scope import JournalScope, journal_scope
from runtime.journal.signals import PastTheSdk
from runtime.record.stop_mark import Stopped
from runtime.stops.listener import FALLBACK_SECONDS


async def run_until_stopped(step: Coroutine[Any, Any, RunResult], scope: JournalScope) -> RunResult:
    """Run `step` (one `Runner.run`) inside the journal scope; raise Stopped on a stop.

    The run's own field is read when the worker's `StopListener` hears of a stop of this run
    (`scope.heard`), and every `FALLBACK_SECONDS` in case the stream missed one."""
    with journal_scope(scope):
        # The task copies the context now: the scope goes with it.
        runner = asyncio.ensure_future(step)
    wake = asyncio.ensure_future(scope.heard.wait()) if scope.heard is not None else None
    try:
        while True:
            waits = {runner} if wake is None else {runner, wake}
            await asyncio.wait(waits, timeout=FALLBACK_SECONDS, return_when=FIRST_COMPLETED)
            if runner.done():
                try:
                    return runner.result()
                except PastTheSdk as carried:
                    raise carried.signal from None
            try:
                mark = await scope.store.stop_mark(scope.lease.run_id)
            except RedisError:
                # Redis away: the step's own calls find out; giving up here would cancel a tool
                # whose output is still being recorded, and the retry would find it lost.
                continue
            if mark is None:
                if wake is not None and wake.done():
                    wake = None  # heard of a stop the record does not hold: poll from now on
                continue
            scope.in_flight.stopping = mark
            while scope.in_flight.count and not runner.done():
                await asyncio.wait({runner}, timeout=0.05)
            raise Stopped(scope.lease.run_id, mark)
    finally:
        for task in (runner, wake):
            if task is not None and not task.done():
                task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception, PastTheSdk):
            await runner
