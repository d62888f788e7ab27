"""The due-set poller on a real Redis: a member whose handler keeps raising is parked, and the
poller goes on with the rest."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis
from pydantic import BaseModel

from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.jobs.due_set import MAX_TRIES, DuePoller
from tests.support.processes import within_ceilings


class NewerRecord(BaseModel):
    """What a newer deploy might have written, read by this one."""

    version: int


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


async def test_a_member_that_keeps_raising_is_parked_and_the_others_are_handled(
    redis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    keys = Keys(prefix)
    due = keys.deadlines
    handled: list[str] = []
    bad_tries: list[str] = []

    async def handle(member: str) -> bool:
        if member == "run-1:bad":
            bad_tries.append(member)
            NewerRecord.model_validate_json('{"version": "three"}')  # raises ValidationError
        handled.append(member)
        return True

    now = time.time()
    await redis.zadd(due, {"run-1:bad": now - 3, "run-2:a": now - 2, "run-3:b": now - 1})
    poller = DuePoller(
        redis=redis, due={due: handle}, name="expiry", interval=0.02, lease_seconds=0.05
    )
    task = asyncio.create_task(poller.run())

    async def parked() -> bool:
        return await redis.zscore(keys.parked(due), "run-1:bad") is not None

    await eventually(parked, "the bad member parked")
    assert not task.done(), "the poller keeps running"
    assert handled == ["run-2:a", "run-3:b"]
    assert len(bad_tries) == MAX_TRIES
    assert await redis.zrange(due, 0, -1) == []
    assert await redis.exists(keys.due_tries(due)) == 0, "no try count left behind"

    await redis.zadd(due, {"run-4:c": time.time()})  # what comes due later is still handled

    async def handled_later() -> bool:
        return "run-4:c" in handled

    await eventually(handled_later, "a later member handled")
    poller.stop()
    await asyncio.wait_for(task, timeout=2)

    failures = [r for r in caplog.records if "run-1:bad" in r.getMessage()]
    assert [r.levelno for r in failures] == [logging.WARNING] * (MAX_TRIES - 1) + [logging.ERROR]
    assert all("ValidationError" in r.getMessage() for r in failures)
    assert all("\n" not in r.getMessage() for r in failures), "one line each"
    assert keys.parked(due) in failures[-1].getMessage(), "says where to look"


async def test_tries_are_counted_across_workers(redis: aioredis.Redis, prefix: str) -> None:
    keys = Keys(prefix)
    due = keys.reminders

    async def raises(member: str) -> bool:
        raise KeyError(member)

    await redis.zadd(due, {"run-1:bad": time.time() - 1})
    workers = [
        DuePoller(redis=redis, due={due: raises}, name=f"w{n}", lease_seconds=0)
        for n in range(MAX_TRIES)
    ]
    for worker in workers:  # each worker takes one try: together they use them all
        assert await worker.sweep() == 1
    assert await redis.zrange(keys.parked(due), 0, -1) == [b"run-1:bad"]
    assert await redis.zrange(due, 0, -1) == []


async def test_a_member_whose_claimer_died_is_handled_when_its_lease_lapses(
    redis: aioredis.Redis, prefix: str
) -> None:
    keys = Keys(prefix)
    due = keys.deadlines
    handled: list[str] = []
    never = asyncio.Event()

    async def dies(member: str) -> bool:
        await never.wait()  # its worker is SIGKILLed here, in effect: the task goes with it
        return True

    async def handle(member: str) -> bool:
        handled.append(member)
        return True

    def poller(name: str, handler: Callable[[str], Awaitable[bool]]) -> DuePoller:
        # Pollers that sleep five minutes between ticks, woken only through the stream.
        return DuePoller(
            redis=redis, due={due: handler}, name=name, wake=keys.due_wake, lease_seconds=0.5
        )

    survivor = poller("survivor", handle)
    surviving = asyncio.create_task(survivor.run())
    await asyncio.sleep(0.2)  # its first tick found nothing: it sleeps the full interval
    await redis.zadd(due, {"run-1:a": time.time() - 1})  # due, and nobody told
    claimer = asyncio.create_task(poller("claimer", dies).run())
    try:
        began = time.monotonic()

        async def handed_on() -> bool:
            return handled == ["run-1:a"]

        await eventually(handed_on, "the member handled by the surviving poller", timeout=5)
        assert time.monotonic() - began >= 0.4, "not before the claimer's lease lapsed"
    finally:
        claimer.cancel()
        survivor.stop()
        await asyncio.wait_for(surviving, timeout=2)
    assert await redis.zrange(due, 0, -1) == []


async def test_a_poller_backs_off_while_redis_does_not_answer(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Through an outage a poller ticking every 20 ms would retry (and log) every 20 ms; it
    backs off instead, the first retry at most its interval later (`runtime.process.backoff`)."""
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]  # nothing listens on it once closed
    client = connect(f"redis://127.0.0.1:{port}/0")
    keys = Keys(prefix)
    poller = DuePoller(redis=client, due={keys.deadlines: _never}, name="expiry", interval=0.02)
    caplog.set_level(logging.WARNING, logger="runtime.jobs.due_set")
    task = asyncio.create_task(poller.run())

    def failed() -> list[str]:
        return [r.getMessage() for r in caplog.records if "tick failed" in r.getMessage()]

    async def three_tries() -> bool:
        return len(failed()) >= 3

    await eventually(three_tries, "three failed ticks", timeout=20)
    poller.stop()
    await asyncio.wait_for(task, 5)
    await client.aclose()
    lines = failed()
    assert within_ceilings(lines, [0.02 * 2**n for n in range(len(lines))]), lines


async def _never(member: str) -> bool:
    raise AssertionError(f"nothing is due without Redis: {member}")
