"""The whole bot in one test: the real web app and worker, a fake Slack and a fake model.

Everything talks over real sockets: signed HTTP into the web app, the Slack SDK out to the fake
Slack, the OpenAI client out to the fake model, and Redis for everything in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from agents import OpenAIProvider, RunConfig
from aiohttp import web
from openai import AsyncOpenAI

from bot.settings import Settings
from bot.slack.members import STANDING_TTL_SECONDS
from bot.web.app import create_web_app
from bot.wiring import blocking_reads_redis, web_redis
from bot.worker import slack_worker
from runtime.conversations.threads import NOTICE_SECONDS
from runtime.db.cluster import connect_cluster
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.policy import load_policy
from runtime.record.layout import TOMBSTONE_SECONDS
from runtime.record.once import ONCE_SECONDS
from runtime.registry import load_registry
from runtime.settings import DEFAULT_CLUSTER_SHARDS
from runtime.worker import Worker
from tests.support.declared_asks import DeclaredAsks
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import FakeSlack, Message
from tests.support.local_server import serve
from tests.support.slack_requests import SlackSender

SIGNING_SECRET = "test-signing-secret"
BOT_TOKEN = "xoxb-test-token"
"""The bot token the processes get and the fake Slack knows (any other is `invalid_auth`)."""


def bot_environ(
    *, slack: FakeSlack, redis_url: str, prefix: str, **overrides: str
) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": slack.api_url,
        "REDIS_URL": redis_url,
        "REDIS_KEY_PREFIX": prefix,
        "AGENTS": "tests.support.agents:REGISTRY",
        "APPROVAL_TTL_SECONDS": "300",
        "JOB_IDLE_TIMEOUT_SECONDS": "1",
        "WORKER_CONCURRENCY": "4",
        # A model 5xx past the `openai` client's own tries fails the job at once, which the
        # fault tests provoke; `tests/runtime/journal/test_model_turns.py` retries inside the run.
        "MODEL_RETRIES": "0",
        # Today's status message and Stop button, which most tests read; the tests of agent
        # sessions and streams (tests/bot/reporting/) turn them on.
        "STREAMING": "off",
        **overrides,
    }


class Harness:
    def __init__(
        self,
        *,
        redis_url: str,
        prefix: str,
        env: Mapping[str, str] | None = None,
        scripted_model: bool = False,
        cluster: bool = False,
    ):
        self.redis_url = redis_url
        self.prefix = prefix
        self.cluster = cluster
        """`redis_url` names a node of a Redis Cluster: the processes get `REDIS_CLUSTER=true`."""
        env = {**(env or {}), **({"REDIS_CLUSTER": "true"} if cluster else {})}
        self.keys = cluster_keys(prefix, env) if cluster else Keys(prefix)
        self.slack = FakeSlack(token=BOT_TOKEN)
        self.model = FakeOpenAI()
        self.env_overrides = env
        self.scripted_model = scripted_model
        """Run the worker with the product's model choice (`model_run_config`), not the fake."""
        self.redis: aioredis.Redis = connect_cluster(redis_url) if cluster else connect(redis_url)
        self._runner: web.AppRunner | None = None
        self._workers: list[
            tuple[Worker, asyncio.Task[None], aiohttp.ClientSession, aioredis.Redis]
        ] = []
        self._session: aiohttp.ClientSession | None = None
        self.web_url = ""
        self.sender: SlackSender
        self._openai: AsyncOpenAI | None = None
        self._asks = DeclaredAsks()
        """Each tool's `needs_approval` before a worker started (`tests.support.declared_asks`)."""

    @property
    def settings(self) -> Settings:
        return self.settings_with()

    def settings_with(self, **more: str) -> Settings:
        environ = bot_environ(
            slack=self.slack,
            redis_url=self.redis_url,
            prefix=self.prefix,
            **{**self.env_overrides, **more},
        )
        return Settings.from_environ(environ)

    async def start(self, *, worker: bool = True) -> None:
        await self.slack.start()
        await self.model.start()
        self._session = aiohttp.ClientSession()
        await self.start_web()
        if worker:
            await self.start_worker()

    async def start_web(self) -> None:
        settings = self.settings
        registry = load_registry(settings.agents)
        app = await create_web_app(
            settings,
            redis=web_redis(settings),
            agent_names=registry.names,
            policy=load_policy(settings),
        )
        # Requests in flight at stop_web() are the bot's own: aiohttp's default grace, not 1 s.
        self._runner, self.web_url = await serve(app, shutdown_timeout=60.0)
        assert self._session is not None
        self.sender = SlackSender(
            self._session, f"{self.web_url}/slack/events", SIGNING_SECRET, self.slack
        )

    async def stop_web(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def run_config(self) -> RunConfig:
        if self._openai is None:
            self._openai = AsyncOpenAI(api_key="sk-test", base_url=self.model.url)
        provider = OpenAIProvider(openai_client=self._openai, use_responses=True)
        return RunConfig(model_provider=provider, tracing_disabled=True)

    async def start_worker(self, name: str | None = None, **env: str) -> Worker:
        settings = self.settings_with(**env)
        self._asks.note(settings.agents)
        session = aiohttp.ClientSession()
        # Its own client for the blocking reads, as `python -m bot worker` has: on the shared
        # client, a cluster's reads (three per shard and worker) would hold its every connection.
        reads = blocking_reads_redis(settings)
        worker = slack_worker(
            settings,
            redis=self.redis,
            session=session,
            registry=load_registry(settings.agents),
            policy=load_policy(settings),
            run_config=None if self.scripted_model else self.run_config(),
            name=name or f"test-worker-{len(self._workers)}",
            poll_interval=0.1,
            reads=reads,
        )
        task = asyncio.get_running_loop().create_task(worker.run())
        self._workers.append((worker, task, session, reads))
        return worker

    async def stop_workers(self) -> None:
        workers, self._workers = self._workers, []
        for worker, _task, _session, _reads in workers:
            worker.stop()
        for _worker, task, session, reads in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=30)
            await session.close()
            await reads.aclose()

    async def stop(self) -> None:
        await self.stop_workers()
        self._asks.restore()
        await self.stop_web()
        if self._session is not None:
            await self._session.close()
        if self._openai is not None:
            await self._openai.close()
        await self.model.stop()
        await self.slack.stop()
        await self.redis.aclose()
        self.slack.assert_nothing_refused()

    # --- conversation helpers ---------------------------------------------------------------

    async def start_run(self, text: str, *, user: str = "UALICE") -> Message:
        """Type `/agent text` and wait for the run's root message."""
        roots = len(self.slack.roots())
        status, body = await self.sender.command(text, user=user)
        assert status == 200, body
        await self.slack.wait_for(lambda: len(self.slack.roots()) > roots, what="root message")
        return self.slack.roots()[-1]

    async def cards(self, root: Message, count: int, timeout: float = 10) -> list[Message]:
        def ready() -> list[Message] | None:
            cards = [c for c in self.slack.cards() if c.thread_ts == root.ts]
            return cards if len(cards) >= count else None

        found: list[Message] = await self.slack.wait_for(
            ready, timeout=timeout, what=f"{count} card(s)"
        )
        return found

    async def final_answer(self, root: Message, timeout: float = 10) -> Message:
        answers = await self.slack.wait_for(
            lambda: self.slack.final_answers(root.ts), timeout=timeout, what="final answer"
        )
        return answers[0]  # type: ignore[no-any-return]

    async def field(self, key: str, name: str) -> bytes:
        value: Any = await self.redis.hget(key, name)
        assert isinstance(value, bytes), f"{key} has no field {name}"
        return value

    async def entries(self, stream: str) -> list[dict[bytes, bytes]]:
        rows: Any = await self.redis.xrange(stream)
        return [fields for _id, fields in rows]

    async def audit_entries(self) -> list[dict[bytes, bytes]]:
        """The whole audit trail, every shard's, in the order Redis wrote it."""
        return await audit_entries(self.redis, self.keys)

    async def audit_until(self, event: str, timeout: float = 10) -> list[dict[str, Any]]:
        """The audit trail as (event, details) once `event` is in it."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            trail = [
                {"event": e[b"event"].decode(), **json.loads(e[b"details"])}
                for e in await self.audit_entries()
            ]
            if any(entry["event"] == event for entry in trail):
                return trail
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no {event} in the audit trail: {trail}")
            await asyncio.sleep(0.05)

    async def run_leftovers(self, settle: float = 5.0) -> list[str]:
        """Keys beyond the audit trail, the job streams, the workers' marks (`LiveWorkers`),
        the due sets' wake-up stream (at most about `WAKE_STREAM_LENGTH` entries), short-lived
        job-id markers, the tombstones of ended runs, the threads' history and the people's
        cached standing (which expire), once the run's record
        is closed: it is closed just after its answer is posted, so this waits up to `settle`
        seconds for none."""
        deadline = asyncio.get_running_loop().time() + settle
        while True:
            left = await self._leftovers()
            if not left or asyncio.get_running_loop().time() >= deadline:
                return left
            await asyncio.sleep(0.05)

    async def jobs_done(self, timeout: float = 10) -> None:
        await jobs_done(self.redis, self.keys, timeout)

    async def _leftovers(self) -> list[str]:
        shards = self.keys.shards
        shared = {key for s in shards for key in (s.audit, *s.job_streams, s.dead_jobs, s.due_wake)}
        shared.add(self.keys.live_workers)  # the workers', not the run's
        markers = tuple(s.job_marker("") for s in shards)
        tombstones = tuple(s.tombstone("") for s in shards)
        onces = tuple(self.keys.once(s.run(""), "") for s in shards)
        threads = tuple(name for s in shards for name in (s.thread(""), s.conversation("")))
        history_ttl = self.settings.conversation_ttl_seconds
        left = []
        for key in await self.keys_left():
            if key in shared:
                continue
            if key.startswith(markers) and 0 < await self.redis.ttl(key) <= 3600:
                continue
            # A script call's reply, kept for a copy redis-py may send late (`once_scripts`).
            if key.startswith(onces) and 0 < await self.redis.ttl(key) <= ONCE_SECONDS:
                continue
            ttl = await self.redis.ttl(key)
            if key.startswith(tombstones) and 0 < ttl <= TOMBSTONE_SECONDS:
                continue
            if key.startswith(threads) and 0 < ttl <= history_ttl:
                continue  # the thread's, kept for a reply in it: it expires with the history
            if key.startswith(self.keys.slack.person("")) and 0 < ttl <= STANDING_TTL_SECONDS:
                continue  # not the run's: whether a person is a member of the workspace
            if key.startswith(self.keys.notice("")) and 0 < ttl <= NOTICE_SECONDS:
                continue  # "still working", said at most once a minute per thread
            left.append(key)
        return left

    async def keys_left(self) -> list[str]:
        return await keys_under(self.redis, self.prefix)


def cluster_keys(prefix: str, env: Mapping[str, str]) -> Keys:
    """The keys the processes use with `REDIS_CLUSTER=true` and `env`'s `REDIS_SHARDS`."""
    return Keys(prefix, int(env.get("REDIS_SHARDS") or DEFAULT_CLUSTER_SHARDS), True)


async def audit_entries(redis: aioredis.Redis, keys: Keys) -> list[dict[bytes, bytes]]:
    """Every shard's audit stream, merged in the order Redis wrote the entries."""
    rows: list[Any] = []
    for shard in keys.shards:
        found: Any = await redis.xrange(shard.audit)
        rows.extend(found)
    rows.sort(key=lambda row: tuple(int(part) for part in row[0].decode().split("-")))
    return [fields for _id, fields in rows]


async def jobs_done(redis: aioredis.Redis, keys: Keys, timeout: float = 10) -> None:
    """Until every job is done: acknowledged jobs leave their stream, and a run's last job is
    acknowledged after its answer is posted and its record closed. What a test that shows
    nothing more happens (no second answer, no retry) waits for, instead of a fixed sleep; a job
    left for a retry never leaves, and the wait fails."""
    streams = [name for shard in keys.shards for name in shard.job_streams]
    deadline = asyncio.get_running_loop().time() + timeout
    while left := [name for name in streams if await redis.xlen(name)]:
        assert asyncio.get_running_loop().time() < deadline, f"jobs still in {left}"
        await asyncio.sleep(0.05)


async def keys_under(redis: aioredis.Redis, prefix: str) -> list[str]:
    """The keys of a deployment prefix: plain ones, and a cluster's tagged `{prefix...}`."""
    found: list[Any] = []
    for pattern in (f"{prefix}*", f"{{{prefix}*"):
        found.extend([key async for key in redis.scan_iter(match=pattern)])
    return sorted(k.decode() for k in found)
