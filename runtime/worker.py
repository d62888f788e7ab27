"""The worker process: runs jobs and expires approvals until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import redis.asyncio as aioredis
from agents import RunConfig
from aiohttp import web
from pydantic import ValidationError

from runtime.audit.arguments import KeptArguments
from runtime.audit.trail import AuditTrail, AuditTrimmer
from runtime.db.connection import wait_until_reachable
from runtime.db.eviction import EvictionPolicyLog
from runtime.db.keys import Keys
from runtime.db.replication import Replication
from runtime.decisions.recorder import DecisionRecorder
from runtime.grants.check import GrantCheck, GrantNotices, Membership
from runtime.grants.store import GrantStore
from runtime.jobs.consumer import JobConsumer
from runtime.jobs.contracts import JOB, ResumeJob, StartJob
from runtime.jobs.due_set import DuePoller, longest_sleep
from runtime.jobs.live_workers import LiveWorkers
from runtime.jobs.queue import Delivery, JobQueue
from runtime.journal.invoker import install_journal
from runtime.mcp.connections import McpConnections
from runtime.mcp.listing import McpListings
from runtime.mcp.tools import McpTools
from runtime.metrics import MetricsEndpoint
from runtime.policy import Policy
from runtime.process.logs import bind_log_context
from runtime.process.readiness import readyz_response
from runtime.process.shutdown import Stopping
from runtime.process.shutdown_budget import ShutdownBudget
from runtime.record.store import RunStore
from runtime.registry import AgentRegistry
from runtime.reporter import Reach, Reporter
from runtime.runs.executor import RunExecutor
from runtime.settings import RuntimeSettings
from runtime.stops.listener import StopWatcher
from runtime.waiting.copies import CardCopies
from runtime.waiting.escalation import Escalation
from runtime.waiting.expiry import Expiry
from runtime.waiting.reminders import Reminders

log = logging.getLogger(__name__)


def consumer_name() -> str:
    """The dyno (`worker.1`) or host and pid, plus a suffix of this boot's own (`worker.1:3f9a1c`).

    In a deploy Heroku starts the new `worker.1` before the old one has stopped: with one name
    between them, the old one's hand-back on SIGTERM would give away the new one's jobs.
    """
    where = os.environ.get("DYNO") or f"{socket.gethostname()}:{os.getpid()}"
    return f"{where}:{secrets.token_hex(3)}"


# A loop that keeps crashing is restarted at most this often.
MAX_RESTART_DELAY_SECONDS = 60.0


class Poller(Protocol):
    """A background loop of the worker, such as a `DuePoller`."""

    name: str

    async def run(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(kw_only=True)
class Worker:
    consumer: JobConsumer
    pollers: Sequence[Poller]
    audit_trimmer: AuditTrimmer
    redis: aioredis.Redis
    redis_setting: str = "REDIS_URL"
    reads: aioredis.Redis | None = None
    """The blocking reads' client, if not `redis`: pinged too before the loops start, since a
    cluster client's first commands, sent by many loops at once, lose connections."""
    """The variable naming this Redis, for the operator to check while it does not answer."""
    shutdown: ShutdownBudget = field(default_factory=lambda: ShutdownBudget(seconds=25.0))
    """Shared with the consumer: the whole stop, from stop() on, fits in it."""
    restart_delay: float = 1.0
    """First wait before restarting a crashed poller; it doubles up to a minute."""
    _stopping: Stopping = field(default_factory=Stopping)
    metrics: MetricsEndpoint | None = None
    """`GET /metrics` on `METRICS_PORT`, when that is set."""
    mcp: McpConnections | None = None
    """Connected before the first job, closed after the last one finished."""
    eviction_log: EvictionPolicyLog = field(default_factory=EvictionPolicyLog)
    """Told once Redis answers, and by each `/readyz` (on `METRICS_PORT`)."""

    async def run(self) -> None:
        """Once Redis answers (a worker may start first), run until stop()."""
        for client in {id(c): c for c in (self.redis, self.reads) if c is not None}.values():
            reachable = await wait_until_reachable(
                client, setting=self.redis_setting, stopping=self._stopping
            )
            if not reachable:
                return
        await self.eviction_log.check(self.redis)
        log.info("worker ready: %d concurrent runs", self.consumer.concurrency)
        # The job consumer is the worker: if it fails the process exits and the platform starts
        # a new one. A poller is a side duty: its crash must not take the jobs down with it.
        mcp = self.mcp.running() if self.mcp else contextlib.nullcontext()
        async with mcp, asyncio.TaskGroup() as group:
            consumer = group.create_task(self.consumer.run())
            loops = [
                group.create_task(self._keep_running(poller.name, poller.run))
                for poller in self.pollers
            ]
            loops.append(
                group.create_task(self._keep_running("audit trimmer", self.audit_trimmer.run))
            )
            if self.metrics is not None:
                loops.append(group.create_task(self.metrics.run()))
            await consumer  # returns after stop(), its jobs finished or handed back
            # A sweep may still wait on Slack; it must not hold the process past the budget.
            # Cutting it short is safe: its lease lapses and a worker handles it again.
            _, late = await asyncio.wait(loops, timeout=self.shutdown.left())
            for task in late:
                task.cancel()

    def stop(self) -> None:
        log.info("stopping: no new jobs; running ones get the grace period")
        self.shutdown.start()
        self._stopping.set()
        self.consumer.stop()
        for poller in self.pollers:
            poller.stop()
        self.audit_trimmer.stop()
        if self.metrics is not None:
            self.metrics.stop()

    async def _keep_running(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        delay = self.restart_delay
        while not self._stopping.is_set():
            try:
                await run()
                return
            except Exception:
                log.exception("%s crashed; restarting it in %g s", name, delay)
            await self._stopping.sleep(delay)
            delay = min(delay * 2, MAX_RESTART_DELAY_SECONDS)


@dataclass(kw_only=True)
class JobRouter:
    """Turns a delivery into a call on the executor."""

    executor: RunExecutor

    async def handle(self, delivery: Delivery) -> None:
        job = self._parse(delivery)
        if job is None:
            return
        bind_log_context(run_id=job.run_id, event=job.kind)  # each job runs in a task of its own
        if isinstance(job, StartJob):
            await self.executor.start(job)
        else:
            await self.executor.resume(job)

    async def on_dead(self, delivery: Delivery) -> None:
        job = self._parse(delivery)
        if job is not None:
            bind_log_context(run_id=job.run_id, event="dead_letter")
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
    poll_interval: float | None = None,
    membership: Membership | None = None,
    grant_notices: GrantNotices | None = None,
    reach: Reach | None = None,
    reads: aioredis.Redis | None = None,
) -> Worker:
    """`membership` answers whether a grant's author is still in an approver group;
    `grant_notices` tells the thread when a grant approved a call; `reach` sends copies of
    cards (`notify`) and escalations; without it, the thread only. `poll_interval` is the
    longest the due-set poller sleeps between ticks (`longest_sleep` if None); `reads` a
    client for the blocking reads of an idle worker, whose socket timeout outlasts
    `BLOCKING_READ_SECONDS`, so that they may wait long; `redis` serves them otherwise."""
    keys = Keys.of(settings)
    shutdown = ShutdownBudget(seconds=settings.shutdown_grace_seconds)
    replication = Replication.of(
        redis, keys, min_replicas=settings.redis_min_replicas, wait_ms=settings.redis_wait_ms
    )
    store = RunStore(redis, keys, replication=replication)
    audit = AuditTrail(
        redis,
        keys,
        arguments=KeptArguments(
            keep=settings.audit_args == "on", max_bytes=settings.audit_args_max_bytes
        ),
    )
    copies = CardCopies(redis, keys, reach) if reach is not None else None
    escalation = (
        Escalation(redis=redis, keys=keys, reach=reach, copies=copies)
        if reach is not None and copies is not None
        else None
    )
    install_journal(registry)
    mcp = McpTools(
        registry,
        policy,
        listings=McpListings(redis, keys),
        probe_interval=settings.mcp_probe_seconds,
        wait_seconds=settings.mcp_wait_seconds,
    )
    has_mcp = mcp.install() > 0
    stops = StopWatcher(reads=reads or redis, streams=[shard.stops for shard in keys.shards])
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
        grants=GrantCheck(
            store=GrantStore(redis, keys),
            membership=membership,
            allow_self_approval=settings.allow_self_approval,
        ),
        grant_notices=grant_notices,
        copies=copies,
        mcp=mcp if has_mcp else None,
        stops=stops,
    )
    router = JobRouter(executor=executor)
    consumer = JobConsumer(
        queue=JobQueue(redis, keys, replication=replication, reads=reads),
        consumer=name or consumer_name(),
        handler=router.handle,
        on_dead=router.on_dead,
        concurrency=settings.worker_concurrency,
        idle_timeout=settings.job_idle_timeout_seconds,
        max_deliveries=settings.job_max_deliveries,
        job_timeout=settings.job_timeout_seconds,
        shutdown=shutdown,
        redis_setting=settings.redis_url_setting,
        live=LiveWorkers(
            redis=redis, key=keys.live_workers, idle_timeout=settings.job_idle_timeout_seconds
        )
        if keys.shard_count > 1
        else None,
    )
    recorder = DecisionRecorder(redis, keys, replication=replication)
    expiry = Expiry(recorder=recorder, reporter=reporter, store=store)
    reminders = Reminders(
        store=store, reporter=reporter, redis=redis, keys=keys, escalation=escalation
    )
    # One poller per shard (one without a cluster), one script per tick for both its due sets
    # (`runtime.jobs.due_set`): a cluster's due sets are one pair per shard (`runtime.db.keys`).
    pollers: list[Poller] = [
        DuePoller(
            redis=redis,
            due={shard.deadlines: expiry.handle, shard.reminders: reminders.handle},
            name="expiry and reminders"
            if keys.shard_count == 1
            else f"expiry and reminders:s{shard.index}",
            interval=poll_interval or longest_sleep(keys.shard_count),
            wake=shard.due_wake,
            reads=reads,
        )
        for shard in keys.shards
    ]
    pollers.append(stops)
    trimmer = AuditTrimmer(audit=audit, retention_days=settings.audit_retention_days)
    eviction_log = EvictionPolicyLog()

    async def readyz() -> web.Response:
        return await readyz_response(redis, eviction_log)

    metrics = (
        MetricsEndpoint(port=settings.metrics_port, readyz=readyz)
        if settings.metrics_port
        else None
    )
    return Worker(
        consumer=consumer,
        pollers=pollers,
        audit_trimmer=trimmer,
        redis=redis,
        redis_setting=settings.redis_url_setting,
        reads=reads,
        shutdown=shutdown,
        metrics=metrics,
        mcp=mcp.connections if has_mcp else None,
        eviction_log=eviction_log,
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
