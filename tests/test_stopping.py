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
