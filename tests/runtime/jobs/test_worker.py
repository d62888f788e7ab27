"""The worker process's loops: a crashing poller is restarted and never stops the jobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from runtime.audit.trail import AuditTrail, AuditTrimmer
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.jobs.consumer import JobConsumer
from runtime.jobs.queue import Delivery, JobQueue
from runtime.process.shutdown import Shutdown
from runtime.worker import Worker
from tests.support.processes import within_ceilings


class CrashesOnce:
    """A poller with a bug that shows on its first run only."""

    name = "flaky poller"

    def __init__(self) -> None:
        self.runs = 0
        self.crashed = asyncio.Event()
        self.restarted = asyncio.Event()
        self._stopping = Shutdown()

    async def run(self) -> None:
        self.runs += 1
        if self.runs == 1:
            self.crashed.set()
            raise RuntimeError("a bug in the poller")
        self.restarted.set()
        await self._stopping.wait()

    def stop(self) -> None:
        self._stopping.set()


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


async def test_a_crashing_poller_is_restarted_and_jobs_keep_running(
    redis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    keys = Keys(prefix)
    queue = JobQueue(redis, keys)
    done: list[str] = []
    handled = asyncio.Event()

    async def record(delivery: Delivery) -> None:
        done.append(delivery.payload)
        handled.set()

    async def nothing(_: Delivery) -> None: ...

    poller = CrashesOnce()
    worker = Worker(
        consumer=JobConsumer(
            queue=queue,
            consumer="w",
            handler=record,
            on_dead=nothing,
            concurrency=1,
            idle_timeout=1,
            max_deliveries=3,
        ),
        pollers=[poller],
        audit_trimmer=AuditTrimmer(audit=AuditTrail(redis, keys), retention_days=90),
        redis=redis,
        restart_delay=0.2,
    )
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(poller.crashed.wait(), timeout=5)
    await queue.enqueue("after-crash", "job after the crash")
    await asyncio.wait_for(handled.wait(), timeout=5)
    await asyncio.wait_for(poller.restarted.wait(), timeout=5)

    assert done == ["job after the crash"]
    assert poller.runs == 2, "restarted after the delay"
    assert not task.done()
    worker.stop()
    await asyncio.wait_for(task, timeout=5)
    [crash] = [r for r in caplog.records if "crashed" in r.getMessage()]
    assert crash.getMessage().startswith("flaky poller crashed; restarting it in ")
    assert within_ceilings([crash.getMessage()], [0.2]), crash.getMessage()
