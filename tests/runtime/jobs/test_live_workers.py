"""With several shards a worker scans for a dead one's jobs only when one is overdue (or left
with jobs in hand), on a Redis of the test's own so that its command counts are the test's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.db.shards import Shard
from runtime.jobs.consumer import JobConsumer
from runtime.jobs.live_workers import MARGIN_SECONDS, LiveWorkers
from runtime.jobs.queue import Delivery, JobQueue
from runtime.process.shutdown_budget import ShutdownBudget
from tests.support.time_passing import mark_older, quiet_for

SHARDS = 4
STREAMS = len(Shard(prefix="").job_streams)
"""A shard's job streams, one per version of the job contract: each is scanned."""
IDLE_TIMEOUT = 0.6
"""A scan is due every third of it: 0.2 s."""


@pytest.fixture
async def redis(tmp_path: Path) -> AsyncIterator[aioredis.Redis]:
    server = RedisServer(directory=tmp_path / "redis")
    server.start()
    client = connect(server.url)
    try:
        yield client
    finally:
        await client.aclose()
        server.stop()


@pytest.fixture
async def keys(redis: aioredis.Redis) -> Keys:
    # Tagged shards work on one Redis as on a cluster: the slots are only not enforced.
    found = Keys("lw:", SHARDS, cluster=True)
    await JobQueue(redis, found).ensure_group()
    return found


def live_workers(redis: aioredis.Redis, keys: Keys) -> LiveWorkers:
    return LiveWorkers(redis=redis, key=keys.live_workers, idle_timeout=IDLE_TIMEOUT)


def consumer(
    redis: aioredis.Redis, keys: Keys, name: str, handler: Any, **options: Any
) -> JobConsumer:
    async def nothing(_: Delivery) -> None: ...

    settings: dict[str, Any] = {
        "concurrency": 2,
        "idle_timeout": IDLE_TIMEOUT,
        "max_deliveries": 3,
        "on_dead": nothing,
        "live": live_workers(redis, keys),
        **options,
    }
    return JobConsumer(queue=JobQueue(redis, keys), consumer=name, handler=handler, **settings)


async def until(check: Callable[[], Awaitable[bool]], seconds: float) -> bool:
    for _ in range(int(seconds / 0.02)):
        if await check():
            return True
        await asyncio.sleep(0.02)
    return await check()


async def at_least(count: Awaitable[int], floor: int) -> bool:
    return await count >= floor


async def gone(score: Awaitable[float | None]) -> bool:
    return await score is None


async def scans(redis: aioredis.Redis) -> int:
    stats: Any = await redis.info("commandstats")
    return int(stats.get("cmdstat_xautoclaim", {}).get("calls", 0))


async def eventually(check: Callable[[], bool], seconds: float) -> bool:
    for _ in range(int(seconds / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


async def test_idle_workers_scan_the_shards_only_when_a_worker_went_quiet(
    redis: aioredis.Redis, keys: Keys
) -> None:
    taken: list[Delivery] = []

    async def record(delivery: Delivery) -> None:
        taken.append(delivery)

    workers = [consumer(redis, keys, name, record) for name in ("one", "two")]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    await asyncio.sleep(2.0)  # ten scan intervals
    idle_scans = await scans(redis)
    for worker in workers:
        worker.stop()
    await asyncio.gather(*tasks)
    # One pass over the shards' streams each, at start; a scan every 0.2 s would have been
    # hundreds.
    assert idle_scans == 2 * SHARDS * STREAMS
    assert await redis.zcard(keys.live_workers) == 0, "stopped cleanly, they left no mark"

    # Another worker said it was alive, took a job and died.
    queue, alive = JobQueue(redis, keys), live_workers(redis, keys)
    await alive.beat("dead")
    await queue.enqueue("orphan", "orphaned job")
    [orphan] = await queue.read("dead", 1, 2000)  # returns once it has it
    first_pass = await scans(redis) + STREAMS * SHARDS
    survivor = consumer(redis, keys, "survivor", record)
    task = asyncio.create_task(survivor.run())
    try:
        # Its first pass comes too early for the job (not idle yet), and the next full scan is
        # minutes away: only the mark going overdue brings the next ones.
        assert await until(lambda: at_least(scans(redis), first_pass), 5.0), "no first pass"
        await quiet_for(redis, keys, orphan.entry_id, "dead", seconds=IDLE_TIMEOUT)
        await mark_older(redis, keys, "dead", seconds=alive.overdue_after)
        # Within less than the 2.6 s after which the mark would have gone overdue by itself.
        assert await eventually(lambda: bool(taken), 2.0), "never taken over"
        assert [(d.entry_id, d.deliveries) for d in taken] == [(orphan.entry_id, 2)]

        # Overdue long enough that all its jobs were found, its mark goes, and so do the scans.
        await mark_older(redis, keys, "dead", seconds=alive.forget_after - alive.overdue_after)
        assert await until(lambda: gone(redis.zscore(keys.live_workers, "dead")), 2.0)
        await asyncio.sleep(0.5)  # a beat (every 0.2 s) has seen it gone
        settled = await scans(redis)
        await asyncio.sleep(1.0)
        assert await scans(redis) == settled
        marks: Any = await redis.zrange(keys.live_workers, 0, -1)
        assert marks == [b"survivor"]
    finally:
        survivor.stop()
        await task


async def test_a_worker_that_stops_holding_jobs_has_them_taken_over_at_once(
    redis: aioredis.Redis, keys: Keys
) -> None:
    started = asyncio.Event()
    ran: list[str] = []

    async def long_job(delivery: Delivery) -> None:
        ran.append(delivery.payload)
        started.set()
        await asyncio.sleep(60)

    leaving = consumer(redis, keys, "leaving", long_job, shutdown=ShutdownBudget(seconds=0.3))
    leaving_task = asyncio.create_task(leaving.run())
    await JobQueue(redis, keys).enqueue("long", "long job")
    await asyncio.wait_for(started.wait(), 5)

    first_pass = await scans(redis) + STREAMS * SHARDS
    staying = consumer(redis, keys, "staying", long_job, shutdown=ShutdownBudget(seconds=0.3))
    staying_task = asyncio.create_task(staying.run())
    assert await until(lambda: at_least(scans(redis), first_pass), 5.0), "no first pass"
    leaving.stop()
    await asyncio.wait_for(leaving_task, 10)
    stopped = asyncio.get_running_loop().time()
    try:
        # Sooner than the leaving worker's mark could go overdue on its own (2.6 s).
        assert await eventually(lambda: len(ran) == 2, IDLE_TIMEOUT + MARGIN_SECONDS - 0.6)
        assert asyncio.get_running_loop().time() - stopped < IDLE_TIMEOUT + MARGIN_SECONDS
    finally:
        staying.stop()
        await staying_task


async def test_a_job_cut_off_by_its_timeout_is_retried_by_the_same_worker(
    redis: aioredis.Redis, keys: Keys
) -> None:
    attempts: list[int] = []

    async def hangs_once(delivery: Delivery) -> None:
        attempts.append(delivery.deliveries)
        if delivery.deliveries == 1:
            await asyncio.Event().wait()  # nothing ever sets it

    first_pass = await scans(redis) + STREAMS * SHARDS
    alone = consumer(redis, keys, "alone", hangs_once, job_timeout=0.5)
    task = asyncio.create_task(alone.run())
    assert await until(lambda: at_least(scans(redis), first_pass), 5.0), "no first pass"
    await JobQueue(redis, keys).enqueue("hung", "hung job")
    try:
        # Nobody is overdue and the next full scan is minutes away: only its own note helps.
        assert await eventually(lambda: attempts == [1, 2], 0.5 + IDLE_TIMEOUT + 1.5), attempts
    finally:
        alone.stop()
        await task
