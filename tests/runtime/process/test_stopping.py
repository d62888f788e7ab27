"""One shutdown signal for every waiting loop: a sleep ends as soon as stop is asked."""

from __future__ import annotations

import asyncio
import time

from runtime.process.shutdown import Shutdown


async def test_a_sleep_wakes_on_stop() -> None:
    stopping = Shutdown()
    started = time.monotonic()
    sleeper = asyncio.create_task(stopping.sleep(30))
    await asyncio.sleep(0.05)
    stopping.set()
    assert await asyncio.wait_for(sleeper, timeout=2) is True
    assert time.monotonic() - started < 2


async def test_a_sleep_runs_its_course_when_nobody_stops() -> None:
    stopping = Shutdown()
    started = time.monotonic()
    assert await stopping.sleep(0.1) is False
    assert time.monotonic() - started >= 0.1
    assert await stopping.sleep(0) is False


async def test_work_waited_for_unless_stopped_is_cancelled_with_its_caller() -> None:
    # A read's caller cancelled (a sibling in its task group failed): before, the read went on,
    # and its failure was logged as "Task exception was never retrieved", a traceback each.
    stopping = Shutdown()
    ended = asyncio.Event()

    async def read() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            ended.set()

    caller = asyncio.create_task(stopping.unless_stopped(read()))
    await asyncio.sleep(0.05)
    caller.cancel()
    await asyncio.wait_for(ended.wait(), timeout=2)
