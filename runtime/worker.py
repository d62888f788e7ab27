"""The worker process: runs jobs and expires approvals until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from dataclasses import dataclass

import redis.asyncio as aioredis
from agents import RunConfig
from pydantic import ValidationError

from runtime.approvals import Approvals
from runtime.audit import AuditTrail
from runtime.contracts import JOB, ResumeJob, StartJob
from runtime.expiry import ExpirySweeper
from runtime.jobs import Delivery, JobConsumer, JobQueue
from runtime.keys import Keys
from runtime.registry import AgentRegistry
from runtime.reporter import Reporter
from runtime.run_executor import RunExecutor
from runtime.run_store import RunStore
from runtime.settings import RuntimeSettings

log = logging.getLogger(__name__)


def consumer_name() -> str:
    """Stable per dyno on Heroku (`worker.1`), unique per process elsewhere."""
    return os.environ.get("DYNO") or f"{socket.gethostname()}:{os.getpid()}"


@dataclass(kw_only=True)
class Worker:
    consumer: JobConsumer
    sweeper: ExpirySweeper

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.consumer.run())
            group.create_task(self.sweeper.run())

    def stop(self) -> None:
        log.info("stopping: no new jobs; running ones get the grace period")
        self.consumer.stop()
        self.sweeper.stop()


@dataclass(kw_only=True)
class JobRouter:
    """Turns a delivery into a call on the executor."""

    executor: RunExecutor

    async def handle(self, delivery: Delivery) -> None:
        job = self._parse(delivery)
        if job is None:
            return
        if isinstance(job, StartJob):
            await self.executor.start(job)
        else:
            await self.executor.resume(job)

    async def on_dead(self, delivery: Delivery) -> None:
        job = self._parse(delivery)
        if job is not None:
            await self.executor.on_dead_job(job)

    @staticmethod
    def _parse(delivery: Delivery) -> StartJob | ResumeJob | None:
        try:
            return JOB.validate_json(delivery.payload)
        except ValidationError:
            # Retrying cannot fix it; it is dropped (acknowledged) with one log line.
            log.error("job %s is malformed and was dropped", delivery.entry_id)
            return None


def build_worker(
    settings: RuntimeSettings,
    *,
    redis: aioredis.Redis,
    reporter: Reporter,
    registry: AgentRegistry,
    run_config: RunConfig | None = None,
    name: str | None = None,
    expiry_interval: float = 1.0,
) -> Worker:
    keys = Keys(settings.redis_key_prefix)
    store = RunStore(redis, keys)
    audit = AuditTrail(redis, keys)
    executor = RunExecutor(
        registry=registry,
        store=store,
        reporter=reporter,
        audit=audit,
        approval_ttl_seconds=settings.approval_ttl_seconds,
        max_turns=settings.max_turns,
        run_config=run_config,
    )
    router = JobRouter(executor=executor)
    consumer = JobConsumer(
        queue=JobQueue(redis, keys),
        consumer=name or consumer_name(),
        handler=router.handle,
        on_dead=router.on_dead,
        concurrency=settings.worker_concurrency,
        idle_timeout=settings.job_idle_timeout_seconds,
        max_deliveries=settings.job_max_deliveries,
    )
    sweeper = ExpirySweeper(
        redis=redis,
        keys=keys,
        approvals=Approvals(redis, keys),
        store=store,
        reporter=reporter,
        audit=audit,
        interval=expiry_interval,
    )
    return Worker(consumer=consumer, sweeper=sweeper)


async def serve_until_signalled(worker: Worker) -> None:
    """Run the worker; SIGTERM or SIGINT starts a graceful stop."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop)
    try:
        await worker.run()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
