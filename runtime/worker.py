"""The worker process: runs jobs and expires approvals until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import redis.asyncio as aioredis
from agents import RunConfig
from aiohttp import web

from runtime.audit.arguments import KeptArguments
from runtime.audit.trail import AuditTrail, AuditTrimmer
from runtime.conversations.threads import ThreadHistory
from runtime.db.connection import wait_until_reachable
from runtime.db.eviction import EvictionPolicyLog
from runtime.db.keys import Keys
from runtime.db.replication import Replication
from runtime.decisions.expiry import Expiry
from runtime.decisions.recorder import DecisionRecorder
from runtime.failover.calls import RecentCalls
from runtime.failover.watch import watch_for
from runtime.grants.check import GrantCheck, GrantNotices, Membership
from runtime.grants.store import GrantStore
from runtime.jobs.consumer import JobConsumer
from runtime.jobs.due_set import DuePoller, longest_sleep
from runtime.jobs.live_workers import LiveWorkers, consumer_name
from runtime.jobs.queue import JobQueue
from runtime.mcp.asking import QuestionNotices
from runtime.mcp.connections import McpConnections
from runtime.mcp.tools import McpTools, installed_mcp_tools
from runtime.metrics import MetricsEndpoint
from runtime.models.install import install_journal
from runtime.models.journaled import journaled_run_config
from runtime.models.retries import model_retry
from runtime.policy import Policy
from runtime.process.backoff import Backoff
from runtime.process.credentials import Credentials
from runtime.process.shutdown import Shutdown
from runtime.process.shutdown_budget import ShutdownBudget
from runtime.readiness import readyz_response
from runtime.record.store import RunStore
from runtime.registry import AgentRegistry
from runtime.reporter import Reach, Reporter
from runtime.runs.executor import RunExecutor
from runtime.runs.router import JobRouter
from runtime.settings import RuntimeSettings
from runtime.stops.listener import StopListener
from runtime.waiting.copies import CardCopies
from runtime.waiting.escalation import Escalation
from runtime.waiting.reminders import Reminders

log = logging.getLogger(__name__)


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
    """The variable naming this Redis, for the operator to check while it does not answer."""
    reads: aioredis.Redis | None = None
    """The blocking reads' client, if not `redis`: pinged too before the loops start, since a
    cluster client's first commands, sent by many loops at once, lose connections."""
    shutdown: ShutdownBudget = field(default_factory=lambda: ShutdownBudget(seconds=25.0))
    """Shared with the consumer: the whole stop, from stop() on, fits in it."""
    restart_delay: float = 1.0
    """First wait before restarting a crashed poller; the shared backoff goes up to a minute."""
    _stopping: Shutdown = field(default_factory=Shutdown)
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
        log.info("stopped, %.1f s after the stop signal", self.shutdown.taken())

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
        backoff = Backoff(self.restart_delay, MAX_RESTART_DELAY_SECONDS)
        while not self._stopping.is_set():
            try:
                await run()
                return
            except Exception:
                log.exception("%s crashed; restarting it in %g s", name, backoff.delay)
            await self._stopping.sleep(backoff.failed())


@dataclass(frozen=True, kw_only=True)
class Agents:
    """What the worker runs: the registry's agents, the policy over their calls, the model."""

    registry: AgentRegistry
    policy: Policy
    run_config: RunConfig | None = None
    """The model and provider; None: the SDK's default (an OpenAI key in the environment)."""


@dataclass(frozen=True, kw_only=True)
class People:
    """How the worker reaches people and asks about them: Slack, in `bot.worker`."""

    reporter: Reporter
    reach: Reach | None = None
    """Sends copies of cards (`notify`) and escalations; None: the thread only."""
    membership: Membership | None = None
    """Whether a grant's author is still in an approver group; None: grants do not ask."""
    grant_notices: GrantNotices | None = None
    """Tells the thread when a grant approved a call."""
    credentials: Credentials | None = None
    """The reporter's (a Slack bot token): refused, work waits (`runtime.process.credentials`)."""
    questions: QuestionNotices | None = None
    """Shows an MCP server's questions to people; None: every question is answered `cancel`."""


@dataclass(frozen=True, kw_only=True)
class _Storage:
    """The Redis side every part of the worker shares: one per process."""

    redis: aioredis.Redis
    reads: aioredis.Redis | None
    keys: Keys
    replication: Replication
    store: RunStore
    recent: RecentCalls
    audit: AuditTrail


def build_worker(
    settings: RuntimeSettings,
    *,
    redis: aioredis.Redis,
    agents: Agents,
    people: People,
    reads: aioredis.Redis | None = None,
    name: str | None = None,
    poll_interval: float | None = None,
) -> Worker:
    """The worker's composition root. `reads` is a client for the blocking reads of an idle
    worker, whose socket timeout outlasts `BLOCKING_READ_SECONDS`, so that they may wait long
    (`redis` serves them otherwise); `name` the consumer's (`consumer_name` if None);
    `poll_interval` the longest the due-set pollers sleep between ticks (`longest_sleep`)."""
    storage = _storage(settings, redis, reads)
    shutdown = ShutdownBudget(seconds=settings.shutdown_grace_seconds)
    install_journal(agents.registry, agents.policy)
    mcp = installed_mcp_tools(
        settings,
        agents.registry,
        agents.policy,
        redis=redis,
        keys=storage.keys,
        kept=storage.audit.arguments,
        notices=people.questions,
    )
    copies = CardCopies(redis, storage.keys, people.reach) if people.reach is not None else None
    stops = StopListener(reads=reads or redis, streams=[s.stops for s in storage.keys.shards])
    executor = _executor(settings, storage, agents, people, copies=copies, mcp=mcp, stops=stops)
    router = JobRouter(executor=executor)
    consumer = _consumer(settings, storage, router, name=name, shutdown=shutdown, people=people)
    watch = watch_for(settings, redis, [storage.recent])
    pollers: list[Poller] = [
        *_due_set_pollers(storage, people, copies, poll_interval),
        stops,
        *watch,
    ]
    if people.credentials is not None:
        pollers.append(people.credentials)  # its check at start
    eviction_log = EvictionPolicyLog()
    return Worker(
        consumer=consumer,
        pollers=pollers,
        audit_trimmer=AuditTrimmer(
            audit=storage.audit, retention_days=settings.audit_retention_days
        ),
        redis=redis,
        redis_setting=settings.redis_url_setting,
        reads=reads,
        shutdown=shutdown,
        metrics=_metrics(settings, redis, eviction_log, people),
        mcp=mcp.connections if mcp is not None else None,
        eviction_log=eviction_log,
    )


def _storage(
    settings: RuntimeSettings, redis: aioredis.Redis, reads: aioredis.Redis | None
) -> _Storage:
    keys = Keys.of(settings)
    replication = Replication.of(
        redis, keys, min_replicas=settings.redis_min_replicas, wait_ms=settings.redis_wait_ms
    )
    recent = RecentCalls.of(settings, redis, keys)
    return _Storage(
        redis=redis,
        reads=reads,
        keys=keys,
        replication=replication,
        store=RunStore(redis, keys, replication=replication, recent=recent),
        recent=recent,
        audit=AuditTrail(
            redis,
            keys,
            arguments=KeptArguments.of(settings),
        ),
    )


def _executor(
    settings: RuntimeSettings,
    storage: _Storage,
    agents: Agents,
    people: People,
    *,
    copies: CardCopies | None,
    mcp: McpTools | None,
    stops: StopListener,
) -> RunExecutor:
    redis, keys = storage.redis, storage.keys
    return RunExecutor.of(
        registry=agents.registry,
        store=storage.store,
        reporter=people.reporter,
        audit=storage.audit,
        policy=agents.policy,
        max_turns=settings.max_turns,
        reminder_at=settings.reminder_at,
        allow_self_approval=settings.allow_self_approval,
        # Whichever model the settings chose, its turns are journaled and its 429s and 5xx
        # retried inside the run.
        run_config=journaled_run_config(agents.run_config, model_retry(settings.model_retries)),
        grants=GrantCheck(
            store=GrantStore(redis, keys),
            membership=people.membership,
            allow_self_approval=settings.allow_self_approval,
        ),
        grant_notices=people.grant_notices,
        copies=copies,
        mcp=mcp,
        stops=stops,
        history=ThreadHistory(
            redis=redis,
            keys=keys,
            ttl_seconds=settings.conversation_ttl_seconds,
            max_items=settings.conversation_max_items,
        ),
    )


def _consumer(
    settings: RuntimeSettings,
    storage: _Storage,
    router: JobRouter,
    *,
    name: str | None,
    shutdown: ShutdownBudget,
    people: People,
) -> JobConsumer:
    redis, keys = storage.redis, storage.keys
    return JobConsumer(
        credentials=people.credentials,
        queue=JobQueue(redis, keys, replication=storage.replication, reads=storage.reads),
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


def _due_set_pollers(
    storage: _Storage, people: People, copies: CardCopies | None, poll_interval: float | None
) -> list[Poller]:
    """One poller per shard (one without a cluster), one script per tick for both its due sets
    (`runtime.jobs.due_set`): a cluster's due sets are one pair per shard (`runtime.db.keys`)."""
    redis, keys, store, reporter = storage.redis, storage.keys, storage.store, people.reporter
    escalation = (
        Escalation(redis=redis, keys=keys, reach=people.reach, copies=copies)
        if people.reach is not None and copies is not None
        else None
    )
    recorder = DecisionRecorder(redis, keys, replication=storage.replication)
    expiry = Expiry(recorder=recorder, reporter=reporter, store=store)
    reminders = Reminders(
        store=store, reporter=reporter, redis=redis, keys=keys, escalation=escalation
    )
    return [
        DuePoller(
            redis=redis,
            due={shard.deadlines: expiry.handle, shard.reminders: reminders.handle},
            name="expiry and reminders"
            if keys.shard_count == 1
            else f"expiry and reminders:s{shard.index}",
            interval=poll_interval or longest_sleep(keys.shard_count),
            wake=shard.due_wake,
            reads=storage.reads,
            credentials=people.credentials,
        )
        for shard in keys.shards
    ]


def _metrics(
    settings: RuntimeSettings, redis: aioredis.Redis, evictions: EvictionPolicyLog, people: People
) -> MetricsEndpoint | None:
    """`GET /metrics` and `/readyz` on `METRICS_PORT`, when that is set."""
    if not settings.metrics_port:
        return None

    async def readyz() -> web.Response:
        return await readyz_response(redis, evictions, people.credentials)

    return MetricsEndpoint(port=settings.metrics_port, readyz=readyz)


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
