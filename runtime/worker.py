"""The worker process: runs jobs and expires approvals until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from dataclasses import dataclass

import redis.asyncio as aioredis
from agents import RunConfig
from pydantic import ValidationError

from runtime.audit import AuditTrail, AuditTrimmer
from runtime.contracts import JOB, ResumeJob, StartJob
from runtime.decision_recorder import DecisionRecorder
from runtime.due_set import DuePoller
from runtime.expiry import Expiry
from runtime.jobs import Delivery, JobConsumer, JobQueue
from runtime.keys import Keys
from runtime.mcp_connections import McpConnections
from runtime.mcp_listing import McpListings
from runtime.mcp_tools import McpTools
from runtime.policy import Policy
from runtime.registry import AgentRegistry
from runtime.reminders import Reminders
from runtime.reporter import Reporter
from runtime.run_executor import RunExecutor
from runtime.run_store import RunStore
from runtime.settings import RuntimeSettings
from runtime.tool_journal import install_journal

log = logging.getLogger(__name__)


def consumer_name() -> str:
    """Stable per dyno on Heroku (`worker.1`), unique per process elsewhere."""
    return os.environ.get("DYNO") or f"{socket.gethostname()}:{os.getpid()}"


@dataclass(kw_only=True)
class Worker:
    consumer: JobConsumer
    pollers: list[DuePoller]
    audit_trimmer: AuditTrimmer
    mcp: McpConnections | None = None
    """Connected before the first job, closed after the last one finished."""

    async def run(self) -> None:
        mcp = self.mcp.running() if self.mcp else contextlib.nullcontext()
        async with mcp, asyncio.TaskGroup() as group:
            group.create_task(self.consumer.run())
            for poller in self.pollers:
                group.create_task(poller.run())
            group.create_task(self.audit_trimmer.run())

    def stop(self) -> None:
        log.info("stopping: no new jobs; running ones get the grace period")
        self.consumer.stop()
        for poller in self.pollers:
            poller.stop()
        self.audit_trimmer.stop()


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
            await self.executor.on_dead_job(job, "")

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
    policy: Policy,
    run_config: RunConfig | None = None,
    name: str | None = None,
    poll_interval: float = 1.0,
) -> Worker:
    keys = Keys(settings.redis_key_prefix)
    store = RunStore(redis, keys)
    audit = AuditTrail(redis, keys)
    install_journal(registry)
    mcp = McpTools(
        registry,
        policy,
        listings=McpListings(redis, keys),
        probe_interval=settings.mcp_probe_seconds,
        wait_seconds=settings.mcp_wait_seconds,
    )
    has_mcp = mcp.install() > 0
    executor = RunExecutor(
        registry=registry,
        store=store,
        reporter=reporter,
        audit=audit,
        policy=policy,
        max_turns=settings.max_turns,
        reminder_at=settings.reminder_at,
        allow_self_approval=settings.allow_self_approval,
        run_config=run_config,
        mcp=mcp if has_mcp else None,
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
        shutdown_grace=settings.shutdown_grace_seconds,
    )
    expiry = Expiry(recorder=DecisionRecorder(redis, keys), reporter=reporter)
    reminders = Reminders(store=store, reporter=reporter)
    pollers = [
        DuePoller(
            redis=redis,
            key=keys.deadlines,
            handler=expiry.handle,
            name="expiry",
            interval=poll_interval,
        ),
        DuePoller(
            redis=redis,
            key=keys.reminders,
            handler=reminders.handle,
            name="reminders",
            interval=poll_interval,
        ),
    ]
    trimmer = AuditTrimmer(audit=audit, retention_days=settings.audit_retention_days)
    return Worker(
        consumer=consumer,
        pollers=pollers,
        audit_trimmer=trimmer,
        mcp=mcp.connections if has_mcp else None,
    )


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
