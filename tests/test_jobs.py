"""The job stream on a real Redis: delivery, takeover, heartbeats, dead letters, hand-back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from runtime.db.connection import connect
from runtime.db.keys import JOB_GROUP, Keys
from runtime.db.local import RedisServer
from runtime.db.replication import NotReplicated
from runtime.jobs.consumer import JobConsumer
from runtime.jobs.queue import Delivery, JobQueue, Overtaken
from runtime.process.shutdown_budget import ShutdownBudget


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
    [stolen] = (await queue.reclaim("fast", 10, 1)).deliveries
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


async def test_a_job_failing_while_redis_is_away_is_tried_again_in_place_not_given_up(
    queue: JobQueue, redis_url: str, prefix: str
) -> None:
    tries: list[int] = []
    back = asyncio.Event()

    async def until_the_replicas_answer(delivery: Delivery) -> None:
        tries.append(delivery.deliveries)
        if not back.is_set():
            raise NotReplicated(0, 1, 100)

    worker = consumer(queue, "w", until_the_replicas_answer, max_deliveries=2, idle_timeout=0.3)
    task = asyncio.create_task(worker.run())
    await queue.enqueue("j", "job")
    await asyncio.sleep(2.5)  # eight idle timeouts: given back each time, it would be buried
    back.set()
    client = connect(redis_url)
    try:
        for _ in range(100):
            if not await pending(queue, client, prefix):
                break
            await asyncio.sleep(0.05)
        assert await pending(queue, client, prefix) == [], "done and acknowledged"
        assert await client.xlen(Keys(prefix).dead_jobs) == 0
    finally:
        worker.stop()
        await task
        await client.aclose()
    assert len(tries) >= 4
    assert set(tries) == {1}, "one delivery, tried again in place"


async def test_a_job_taken_over_while_its_worker_was_cut_off_is_left_to_the_new_holder(
    queue: JobQueue, redis_url: str, prefix: str
) -> None:
    tries: list[str] = []
    tried = asyncio.Event()

    async def cut_off(delivery: Delivery) -> None:
        tries.append("cut off")
        tried.set()
        raise RedisConnectionError("Connection refused")

    async def fine(delivery: Delivery) -> None:
        tries.append("new holder")

    await queue.enqueue("j", "job")
    cut = consumer(queue, "cut-off", cut_off)
    cut_task = asyncio.create_task(cut.run())
    await tried.wait()
    # Its heartbeats fail meanwhile (in effect): the job goes quiet and another takes it.
    [taken] = (await queue.reclaim("new", 0, 10)).deliveries
    await fine(taken)
    # Its next try is due after 0.25 s; the new holder's job goes idle-timed-out after 0.6 s.
    await asyncio.sleep(0.45)
    assert tries == ["cut off", "new holder"], "not tried again by the worker that lost it"
    client = connect(redis_url)
    [row] = await pending(queue, client, prefix)
    await client.aclose()
    assert row["consumer"] == b"new", "not acknowledged by the worker that lost it"
    cut.stop()
    await cut_task


@pytest.mark.parametrize("taken_over", [True, False], ids=["taken-over", "still-held"])
async def test_an_overtaken_delivery_acknowledges_its_job_only_if_it_still_holds_it(
    queue: JobQueue, redis_url: str, prefix: str, taken_over: bool
) -> None:
    # A worker stalls; meanwhile its job is taken over (or another job of the same run claims
    # the run). Acknowledged by the stalled worker, a taken-over job would be lost if the
    # worker now holding it died before it was done.
    async def overtaken(delivery: Delivery) -> None:
        if taken_over:
            await queue.reclaim("new", 0, 10)
        raise Overtaken("a later delivery took the run")

    await queue.enqueue("j", "job")
    worker = consumer(queue, "stalled", overtaken)
    task = asyncio.create_task(worker.run())
    client = connect(redis_url)
    try:
        await asyncio.sleep(0.3)  # within the idle timeout: nobody takes it back meanwhile
        rows = await pending(queue, client, prefix)
        if taken_over:
            assert [row["consumer"] for row in rows] == [b"new"], "left to its new holder"
        else:
            assert rows == [], "its own: acknowledged"
    finally:
        worker.stop()
        await task
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
    # Claimable at once: the hand-back set its idle time high.
    [handed] = (await queue.reclaim("next", 600, 10)).deliveries
    assert handed.payload == "long"


async def test_a_dead_workers_job_behind_many_live_ones_is_taken_over(queue: JobQueue) -> None:
    # XAUTOCLAIM looks at a bounded stretch of the pending list per call (COUNT x 10 entries
    # on Redis 7, COUNT on 6.2): 25 live jobs ahead of the orphan hide it from a scan that
    # always starts at the front.
    release = asyncio.Event()
    running: list[str] = []

    async def hold(delivery: Delivery) -> None:
        running.append(delivery.payload)
        await release.wait()

    live = consumer(queue, "live", hold, concurrency=25)
    live_task = asyncio.create_task(live.run())
    for n in range(25):
        await queue.enqueue(f"live-{n}", f"live {n}")
    for _ in range(100):
        if len(running) == 25:
            break
        await asyncio.sleep(0.05)
    assert len(running) == 25
    await queue.enqueue("orphan", "orphaned job")
    [orphan] = await queue.read("dead-worker", 1, 100)  # read, then the worker dies

    taken: list[Delivery] = []

    async def record(delivery: Delivery) -> None:
        taken.append(delivery)

    thief = consumer(queue, "thief", record, concurrency=1)
    thief_task = asyncio.create_task(thief.run())
    # Idle after 0.6 s; then one XAUTOCLAIM per tick (<= 0.2 s) covers 10 entries: 3 ticks.
    for _ in range(40):
        if taken:
            break
        await asyncio.sleep(0.1)
    release.set()
    for c in (live, thief):
        c.stop()
    await asyncio.gather(live_task, thief_task)
    assert [(d.entry_id, d.deliveries) for d in taken] == [(orphan.entry_id, 2)]
    assert len(running) == 25, "no live job was stolen"


async def test_a_hung_job_is_cancelled_retried_and_dead_lettered(
    queue: JobQueue, redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[int] = []
    cancelled: list[int] = []
    buried: list[Delivery] = []

    async def hangs(delivery: Delivery) -> None:
        attempts.append(delivery.deliveries)
        try:
            await asyncio.Event().wait()  # nothing ever sets it
        except asyncio.CancelledError:
            cancelled.append(delivery.deliveries)
            raise

    async def on_dead(delivery: Delivery) -> None:
        buried.append(delivery)

    worker = consumer(
        queue, "w", hangs, max_deliveries=2, on_dead=on_dead, idle_timeout=0.3, job_timeout=0.5
    )
    task = asyncio.create_task(worker.run())
    await queue.enqueue("hung", "hung job")
    for _ in range(60):
        if buried:
            break
        await asyncio.sleep(0.1)
    worker.stop()
    await task
    assert attempts == [1, 2], "retried once after its first try was cut off"
    assert cancelled == [1, 2]
    assert [d.payload for d in buried] == ["hung job"]
    client = connect(redis_url)
    assert await pending(queue, client, prefix) == []
    await client.aclose()
    timeouts = [r.getMessage() for r in caplog.records if "JOB_TIMEOUT_SECONDS" in r.getMessage()]
    assert len(timeouts) == 2, timeouts


async def test_consumers_of_stopped_boots_are_dropped_unless_they_hold_jobs(
    queue: JobQueue, redis_url: str, prefix: str
) -> None:
    client = connect(redis_url)
    jobs = Keys(prefix).jobs
    await client.xgroup_createconsumer(jobs, JOB_GROUP, "worker.1:0ld001")  # stopped cleanly
    await queue.enqueue("held", "held job")
    await queue.read("worker.2:0ld002", 1, 100)  # killed while it held a job
    await asyncio.sleep(0.4)

    async def nothing(_: Delivery) -> None: ...

    live = consumer(queue, "worker.1:n3w001", nothing, idle_timeout=30, consumer_gone_after=0.3)
    task = asyncio.create_task(live.run())

    async def names() -> set[str]:
        rows: Any = await client.xinfo_consumers(jobs, JOB_GROUP)
        return {row["name"].decode() for row in rows}

    for _ in range(50):
        if "worker.1:0ld001" not in await names():
            break
        await asyncio.sleep(0.05)
    # One script drops and keeps: once the first is gone, the second was looked at too.
    assert await names() - {"worker.1:n3w001"} == {"worker.2:0ld002"}
    live.stop()
    await task
    await client.aclose()


async def test_queued_jobs_fill_every_free_slot_in_one_read(tmp_path: Path) -> None:
    # A Redis of the test's own: its command counts are this test's alone.
    server = RedisServer(directory=tmp_path / "redis")
    server.start()
    client = connect(server.url)
    try:
        queue = JobQueue(client, Keys("reads:"))
        await queue.ensure_group()
        for n in range(30):
            await queue.enqueue(f"job-{n}", f"job {n}")
        await client.config_resetstat()
        release = asyncio.Event()
        running: list[str] = []

        async def hold(delivery: Delivery) -> None:
            running.append(delivery.payload)
            await release.wait()

        worker = consumer(queue, "many", hold, concurrency=20, idle_timeout=30.0)
        task = asyncio.create_task(worker.run())
        for _ in range(100):
            if len(running) == 20:
                break
            await asyncio.sleep(0.05)
        stats: Any = await client.info("commandstats")
        reads = stats.get("cmdstat_xreadgroup", {}).get("calls", 0)
        summary: Any = await client.xpending(Keys("reads:").jobs, JOB_GROUP)
        release.set()
        worker.stop()
        await task
    finally:
        await client.aclose()
        server.stop()
    assert len(running) == 20
    assert summary["pending"] == 20, "read no more jobs than it had free slots"
    assert reads == 1, f"{reads} reads for 20 free slots"
