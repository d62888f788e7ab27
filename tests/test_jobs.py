"""The job stream on a real Redis: delivery, takeover, heartbeats, dead letters, hand-back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.jobs import Delivery, JobConsumer, JobQueue
from runtime.keys import JOB_GROUP, Keys
from runtime.redis_connection import connect
from runtime.shutdown_budget import ShutdownBudget


@pytest.fixture
async def queue(redis_url: str, prefix: str) -> AsyncIterator[JobQueue]:
    client = connect(redis_url)
    job_queue = JobQueue(client, Keys(prefix))
    await job_queue.ensure_group()
    yield job_queue
    await client.aclose()


def consumer(queue: JobQueue, name: str, handler: Any, **options: Any) -> JobConsumer:
    async def nothing(_: Delivery) -> None: ...

    defaults: dict[str, Any] = {
        "concurrency": 2,
        "idle_timeout": 0.6,
        "max_deliveries": 3,
        "on_dead": nothing,
    }
    return JobConsumer(queue=queue, consumer=name, handler=handler, **{**defaults, **options})


async def pending(queue: JobQueue, redis: aioredis.Redis, prefix: str) -> list[dict[str, Any]]:
    rows: Any = await redis.xpending_range(Keys(prefix).jobs, JOB_GROUP, "-", "+", 100)
    return list(rows)


async def test_enqueue_is_idempotent_by_job_id(queue: JobQueue) -> None:
    assert await queue.enqueue("job-1", "a")
    assert not await queue.enqueue("job-1", "a again")
    assert await queue.enqueue("job-2", "b")
    got = await queue.read("c1", 10, 100)
    assert [d.payload for d in got] == ["a", "b"]


async def test_a_running_job_heartbeats_and_is_not_stolen(
    queue: JobQueue, redis_url: str, prefix: str
) -> None:
    ran: list[str] = []
    release = asyncio.Event()

    async def slow(delivery: Delivery) -> None:
        ran.append(delivery.payload)
        await release.wait()

    first = consumer(queue, "first", slow)
    second = consumer(queue, "second", slow)
    tasks = [asyncio.create_task(c.run()) for c in (first, second)]
    await queue.enqueue("long", "long job")
    await asyncio.sleep(2.5)  # four idle timeouts
    assert ran == ["long job"], "never handed to the second consumer"
    release.set()
    for c in (first, second):
        c.stop()
    await asyncio.gather(*tasks)


async def test_a_dead_workers_job_is_taken_over(queue: JobQueue) -> None:
    await queue.enqueue("orphan", "orphaned job")
    [taken] = await queue.read("dead-worker", 1, 100)  # read, then the worker dies

    done: list[Delivery] = []

    async def record(delivery: Delivery) -> None:
        done.append(delivery)

    live = consumer(queue, "live", record)
    task = asyncio.create_task(live.run())
    for _ in range(50):
        if done:
            break
        await asyncio.sleep(0.1)
    live.stop()
    await task
    assert [(d.entry_id, d.payload, d.deliveries) for d in done] == [
        (taken.entry_id, "orphaned job", 2)
    ]


async def test_heartbeat_does_not_take_back_a_job_another_worker_took_over(
    queue: JobQueue, redis_url: str, prefix: str
) -> None:
    await queue.enqueue("j", "job")
    [delivery] = await queue.read("slow", 1, 100)
    await asyncio.sleep(0.05)
    [stolen] = await queue.reclaim("fast", 10, 1)
    assert await queue.heartbeat("slow", [delivery.entry_id]) == 0
    client = connect(redis_url)
    [row] = await pending(queue, client, prefix)
    await client.aclose()
    assert row["consumer"] == b"fast"
    assert stolen.entry_id == delivery.entry_id


async def test_a_job_that_keeps_failing_goes_to_the_dead_letter_stream(
    queue: JobQueue, redis_url: str, prefix: str
) -> None:
    attempts: list[int] = []
    buried: list[Delivery] = []

    async def failing(delivery: Delivery) -> None:
        attempts.append(delivery.deliveries)
        raise RuntimeError("always")

    async def on_dead(delivery: Delivery) -> None:
        buried.append(delivery)

    worker = consumer(queue, "w", failing, max_deliveries=2, on_dead=on_dead, idle_timeout=0.3)
    task = asyncio.create_task(worker.run())
    await queue.enqueue("bad", "bad job")
    for _ in range(60):
        if buried:
            break
        await asyncio.sleep(0.1)
    worker.stop()
    await task
    assert attempts == [1, 2]
    assert [d.payload for d in buried] == ["bad job"]
    client = connect(redis_url)
    dead: Any = await client.xrange(Keys(prefix).dead_jobs)
    assert dead[0][1][b"job"] == b"bad job"
    assert await pending(queue, client, prefix) == []
    await client.aclose()


async def test_stopping_finishes_short_jobs_and_hands_back_long_ones(
    queue: JobQueue, redis_url: str, prefix: str
) -> None:
    finished: list[str] = []
    started = asyncio.Event()

    async def job(delivery: Delivery) -> None:
        started.set()
        await asyncio.sleep(0.2 if delivery.payload == "short" else 60)
        finished.append(delivery.payload)

    worker = consumer(queue, "w", job, shutdown=ShutdownBudget(seconds=0.5))
    task = asyncio.create_task(worker.run())
    await queue.enqueue("s", "short")
    await queue.enqueue("l", "long")
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.sleep(0.1)
    worker.stop()
    await asyncio.wait_for(task, timeout=10)
    assert finished == ["short"]
    await queue.enqueue("n", "new")  # taken by nobody: the stopped worker reads no more
    [handed] = await queue.reclaim("next", 600, 10)  # claimable at once: idle was set high
    assert handed.payload == "long"
