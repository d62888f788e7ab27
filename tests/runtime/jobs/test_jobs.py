"""The job stream on a real Redis: delivery, takeover, heartbeats, dead letters, hand-back."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
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
from tests.support.time_passing import quiet_for


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def queue(redis: aioredis.Redis, prefix: str) -> JobQueue:
    job_queue = JobQueue(redis, Keys(prefix))
    await job_queue.ensure_group()
    return job_queue


def consumer(queue: JobQueue, name: str, handler: Any, **options: Any) -> JobConsumer:
    async def nothing(_: Delivery) -> None: ...

    defaults: dict[str, Any] = {
        "concurrency": 2,
        "idle_timeout": 0.6,
        "max_deliveries": 3,
        "on_dead": nothing,
    }
    return JobConsumer(queue=queue, consumer=name, handler=handler, **{**defaults, **options})


async def pending(redis: aioredis.Redis, prefix: str) -> list[dict[str, Any]]:
    rows: Any = await redis.xpending_range(Keys(prefix).jobs, JOB_GROUP, "-", "+", 100)
    return list(rows)


@contextlib.asynccontextmanager
async def running(*workers: JobConsumer) -> AsyncIterator[None]:
    """The workers run inside the block, and are stopped and awaited when it ends."""
    tasks = [asyncio.create_task(worker.run()) for worker in workers]
    try:
        yield
    finally:
        for worker in workers:
            worker.stop()
        await asyncio.gather(*tasks)


async def eventually(check: Callable[[], bool], seconds: float) -> None:
    """Poll `check` for up to `seconds`; the caller asserts what it expects afterwards."""
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)


async def test_enqueue_is_idempotent_by_job_id(queue: JobQueue) -> None:
    assert await queue.enqueue("job-1", "a")
    assert not await queue.enqueue("job-1", "a again")
    assert await queue.enqueue("job-2", "b")
    got = await queue.read("c1", 10, 100)
    assert [d.payload for d in got] == ["a", "b"]


async def test_a_stream_found_missing_is_made_again_with_its_group_on_both_redis_versions(
    redis_binary: str, tmp_path: Path
) -> None:
    """An emptied Redis: the job is added to a stream made again with its group (it is read),
    and a duplicate adds nothing but makes the stream all the same. Where the stream is there,
    the job is added in one step (`XADD NOMKSTREAM`) after its marker."""
    with RedisServer(directory=tmp_path / "redis", binary=redis_binary) as server:
        client = connect(server.url)
        keys = Keys("lost:")
        queue = JobQueue(client, keys)
        try:
            await queue.ensure_group()
            before: Any = await client.info("commandstats")
            assert await queue.enqueue("j1", "{}")
            after: Any = await client.info("commandstats")
            exists = [stats.get("cmdstat_exists", {}).get("calls", 0) for stats in (before, after)]
            assert exists[0] == exists[1], "the stream is not looked for first"
            await client.delete(*keys.shard_of("j2").job_streams)
            assert await queue.enqueue("j2", '{"n": 2}')
            [delivery] = await queue.read("w1", 10, 100)
            assert delivery.payload == '{"n": 2}'
            await client.delete(*keys.shard_of("j2").job_streams)
            assert not await queue.enqueue("j2", "{}"), "a duplicate"
            for stream in keys.shard_of("j2").job_streams:
                groups: Any = await client.xinfo_groups(stream)
                names = [g["name"] for g in groups]
                assert [n.decode() if isinstance(n, bytes) else n for n in names] == [JOB_GROUP]
        finally:
            await client.aclose()


async def test_a_running_job_heartbeats_and_is_not_stolen(queue: JobQueue) -> None:
    ran: list[str] = []
    release = asyncio.Event()

    async def slow(delivery: Delivery) -> None:
        ran.append(delivery.payload)
        await release.wait()

    async with running(consumer(queue, "first", slow), consumer(queue, "second", slow)):
        await queue.enqueue("long", "long job")
        await asyncio.sleep(2.5)  # four idle timeouts
        assert ran == ["long job"], "never handed to the second consumer"
        release.set()


async def test_a_dead_workers_job_is_taken_over(queue: JobQueue) -> None:
    await queue.enqueue("orphan", "orphaned job")
    [taken] = await queue.read("dead-worker", 1, 100)  # read, then the worker dies

    done: list[Delivery] = []

    async def record(delivery: Delivery) -> None:
        done.append(delivery)

    async with running(consumer(queue, "live", record)):
        await eventually(lambda: bool(done), seconds=5)
    assert [(d.entry_id, d.payload, d.deliveries) for d in done] == [
        (taken.entry_id, "orphaned job", 2)
    ]


async def test_heartbeat_does_not_take_back_a_job_another_worker_took_over(
    queue: JobQueue, redis: aioredis.Redis, prefix: str
) -> None:
    await queue.enqueue("j", "job")
    [delivery] = await queue.read("slow", 1, 100)
    await quiet_for(redis, Keys(prefix), delivery.entry_id, "slow", seconds=0.05)
    [stolen] = (await queue.reclaim("fast", 10, 1)).deliveries
    assert await queue.heartbeat("slow", [delivery.entry_id]) == 0
    [row] = await pending(redis, prefix)
    assert row["consumer"] == b"fast"
    assert stolen.entry_id == delivery.entry_id


async def test_a_job_that_keeps_failing_goes_to_the_dead_letter_stream(
    queue: JobQueue, redis: aioredis.Redis, prefix: str
) -> None:
    attempts: list[int] = []
    buried: list[Delivery] = []

    async def failing(delivery: Delivery) -> None:
        attempts.append(delivery.deliveries)
        raise RuntimeError("always")

    async def on_dead(delivery: Delivery) -> None:
        buried.append(delivery)

    worker = consumer(queue, "w", failing, max_deliveries=2, on_dead=on_dead, idle_timeout=0.3)
    async with running(worker):
        await queue.enqueue("bad", "bad job")
        await eventually(lambda: bool(buried), seconds=6)
    assert attempts == [1, 2]
    assert [d.payload for d in buried] == ["bad job"]
    dead: Any = await redis.xrange(Keys(prefix).dead_jobs)
    assert dead[0][1][b"job"] == b"bad job"
    assert await pending(redis, prefix) == []


async def test_a_job_that_recurses_too_deep_is_dead_lettered_at_once_not_retried(
    queue: JobQueue, redis: aioredis.Redis, prefix: str
) -> None:
    attempts: list[int] = []
    buried: list[Delivery] = []

    async def too_deep(delivery: Delivery) -> None:
        attempts.append(delivery.deliveries)
        json.loads("[" * 100_000 + "]" * 100_000)  # what a parser does with input so deep

    async def on_dead(delivery: Delivery) -> None:
        buried.append(delivery)

    worker = consumer(queue, "w", too_deep, max_deliveries=3, on_dead=on_dead, idle_timeout=0.3)
    async with running(worker):
        await queue.enqueue("deep", "deep job")
        await eventually(lambda: bool(buried), seconds=6)
    assert attempts == [1], "retrying cannot help"
    dead: Any = await redis.xrange(Keys(prefix).dead_jobs)
    assert dead[0][1][b"reason"] == b"input nested too deeply to handle"
    assert await pending(redis, prefix) == []


async def test_a_job_failing_while_redis_is_away_is_tried_again_in_place_not_given_up(
    queue: JobQueue, redis: aioredis.Redis, prefix: str
) -> None:
    tries: list[int] = []
    back = asyncio.Event()

    async def until_the_replicas_answer(delivery: Delivery) -> None:
        tries.append(delivery.deliveries)
        if not back.is_set():
            raise NotReplicated(0, 1, 100)

    worker = consumer(queue, "w", until_the_replicas_answer, max_deliveries=2, idle_timeout=0.3)
    async with running(worker):
        await queue.enqueue("j", "job")
        await asyncio.sleep(2.5)  # eight idle timeouts: given back each time, it would be buried
        back.set()
        for _ in range(100):
            if not await pending(redis, prefix):
                break
            await asyncio.sleep(0.05)
        assert await pending(redis, prefix) == [], "done and acknowledged"
        assert await redis.xlen(Keys(prefix).dead_jobs) == 0
    assert len(tries) >= 4
    assert set(tries) == {1}, "one delivery, tried again in place"


async def test_a_job_taken_over_while_its_worker_was_cut_off_is_left_to_the_new_holder(
    queue: JobQueue, redis: aioredis.Redis, prefix: str
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
    async with running(consumer(queue, "cut-off", cut_off)):
        await tried.wait()
        # Its heartbeats fail meanwhile (in effect): the job goes quiet and another takes it.
        [taken] = (await queue.reclaim("new", 0, 10)).deliveries
        await fine(taken)
        # Its next try is due after 0.25 s; the new holder's job goes idle-timed-out after 0.6 s.
        await asyncio.sleep(0.45)
        assert tries == ["cut off", "new holder"], "not tried again by the worker that lost it"
        [row] = await pending(redis, prefix)
        assert row["consumer"] == b"new", "not acknowledged by the worker that lost it"


@pytest.mark.parametrize("taken_over", [True, False], ids=["taken-over", "still-held"])
async def test_an_overtaken_delivery_acknowledges_its_job_only_if_it_still_holds_it(
    queue: JobQueue, redis: aioredis.Redis, prefix: str, taken_over: bool
) -> None:
    # A worker stalls; meanwhile its job is taken over (or another job of the same run claims
    # the run). Acknowledged by the stalled worker, a taken-over job would be lost if the
    # worker now holding it died before it was done.
    async def overtaken(delivery: Delivery) -> None:
        if taken_over:
            await queue.reclaim("new", 0, 10)
        raise Overtaken("a later delivery took the run")

    await queue.enqueue("j", "job")
    async with running(consumer(queue, "stalled", overtaken)):
        await asyncio.sleep(0.3)  # within the idle timeout: nobody takes it back meanwhile
        rows = await pending(redis, prefix)
        if taken_over:
            assert [row["consumer"] for row in rows] == [b"new"], "left to its new holder"
        else:
            assert rows == [], "its own: acknowledged"


async def test_stopping_finishes_short_jobs_and_hands_back_long_ones(queue: JobQueue) -> None:
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
    held: list[str] = []

    async def hold(delivery: Delivery) -> None:
        held.append(delivery.payload)
        await release.wait()

    taken: list[Delivery] = []

    async def record(delivery: Delivery) -> None:
        taken.append(delivery)

    async with running(consumer(queue, "live", hold, concurrency=25)):
        for n in range(25):
            await queue.enqueue(f"live-{n}", f"live {n}")
        await eventually(lambda: len(held) == 25, seconds=5)
        assert len(held) == 25
        await queue.enqueue("orphan", "orphaned job")
        [orphan] = await queue.read("dead-worker", 1, 100)  # read, then the worker dies
        async with running(consumer(queue, "thief", record, concurrency=1)):
            # Idle after 0.6 s; then one XAUTOCLAIM per tick (<= 0.2 s) covers 10 entries.
            await eventually(lambda: bool(taken), seconds=4)
            release.set()
    assert [(d.entry_id, d.deliveries) for d in taken] == [(orphan.entry_id, 2)]
    assert len(held) == 25, "no live job was stolen"


async def test_a_hung_job_is_cancelled_retried_and_dead_lettered(
    queue: JobQueue, redis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
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
    async with running(worker):
        await queue.enqueue("hung", "hung job")
        await eventually(lambda: bool(buried), seconds=6)
    assert attempts == [1, 2], "retried once after its first try was cut off"
    assert cancelled == [1, 2]
    assert [d.payload for d in buried] == ["hung job"]
    assert await pending(redis, prefix) == []
    timeouts = [r.getMessage() for r in caplog.records if "JOB_TIMEOUT_SECONDS" in r.getMessage()]
    assert len(timeouts) == 2, timeouts


async def test_consumers_of_stopped_boots_are_dropped_unless_they_hold_jobs(
    queue: JobQueue, redis: aioredis.Redis, prefix: str
) -> None:
    jobs = Keys(prefix).jobs
    await redis.xgroup_createconsumer(jobs, JOB_GROUP, "worker.1:0ld001")  # stopped cleanly
    await queue.enqueue("held", "held job")
    await queue.read("worker.2:0ld002", 1, 100)  # killed while it held a job
    await asyncio.sleep(0.4)

    async def nothing(_: Delivery) -> None: ...

    async def names() -> set[str]:
        rows: Any = await redis.xinfo_consumers(jobs, JOB_GROUP)
        return {row["name"].decode() for row in rows}

    live = consumer(queue, "worker.1:n3w001", nothing, idle_timeout=30, consumer_gone_after=0.3)
    async with running(live):
        for _ in range(50):
            if "worker.1:0ld001" not in await names():
                break
            await asyncio.sleep(0.05)
        # One script drops and keeps: once the first is gone, the second was looked at too.
        assert await names() - {"worker.1:n3w001"} == {"worker.2:0ld002"}


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
        held: list[str] = []

        async def hold(delivery: Delivery) -> None:
            held.append(delivery.payload)
            await release.wait()

        async with running(consumer(queue, "many", hold, concurrency=20, idle_timeout=30.0)):
            await eventually(lambda: len(held) == 20, seconds=5)
            stats: Any = await client.info("commandstats")
            reads = stats.get("cmdstat_xreadgroup", {}).get("calls", 0)
            summary: Any = await client.xpending(Keys("reads:").jobs, JOB_GROUP)
            release.set()
    finally:
        await client.aclose()
        server.stop()
    assert len(held) == 20
    assert summary["pending"] == 20, "read no more jobs than it had free slots"
    assert reads == 1, f"{reads} reads for 20 free slots"
