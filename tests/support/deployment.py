"""A small Heroku-like deployment for tests and benchmarks: the Procfile's processes, for real.

A fake Slack and a fake model run in the test's process; `web` and `worker` processes are
started from the Procfile lines, as written, and can be stopped, killed and restarted.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from runtime.db.cluster import connect_cluster
from runtime.db.keys import JOB_GROUP, Keys
from runtime.db.local import free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import FakeSlack, Message
from tests.support.harness import (
    BOT_TOKEN,
    SIGNING_SECRET,
    audit_entries,
    bot_environ,
    cluster_keys,
    jobs_done,
)
from tests.support.processes import Process, procfile, wait_until_healthy
from tests.support.slack_requests import SlackSender


class Deployment:
    """A Slack, a model, and the Procfile's processes, like a small Heroku app."""

    def __init__(self, redis_url: str, prefix: str, logs: Path, *, cluster: bool = False) -> None:
        self.slack = FakeSlack(token=BOT_TOKEN)
        self.model = FakeOpenAI()
        self.redis_url = redis_url
        self.cluster = cluster
        """`redis_url` names a node of a Redis Cluster: the processes get `REDIS_CLUSTER=true`."""
        self.keys = cluster_keys(prefix, {}) if cluster else Keys(prefix)
        self.prefix = prefix
        self.logs = logs
        self.port = free_port()
        self.processes: list[Process] = []
        self.redis = connect_cluster(redis_url) if cluster else aioredis.Redis.from_url(redis_url)
        self.session: aiohttp.ClientSession
        self.sender: SlackSender

    @property
    def ledger_key(self) -> str:
        """Where the test agents' tools record each execution (see tests/support/agents.py)."""
        return f"{self.prefix}test:ledger"

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "COUNTERSIGN_TEST_LEDGER": f"{self.redis_url} {self.ledger_key}",
            "SLOW_TOOL_SECONDS": "30",
            **bot_environ(slack=self.slack, redis_url=self.redis_url, prefix=self.prefix),
            "PORT": str(self.port),
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": self.model.url,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            **({"REDIS_CLUSTER": "true"} if self.cluster else {}),
            **extra,
        }

    async def start(self) -> None:
        await self.slack.start()
        await self.model.start()
        self.session = aiohttp.ClientSession()
        self.sender = SlackSender(
            self.session, f"http://127.0.0.1:{self.port}/slack/events", SIGNING_SECRET, self.slack
        )

    async def web(self, *, netns: str | None = None, **env: str) -> Process:
        """The web process (in network namespace `netns`, if given: its port must reach the
        test's loopback, `tests.support.lab_redis.LabRedis.expose`)."""
        process = Process("web", procfile()["web"], self.env(**env), self.logs, netns=netns)
        self.processes.append(process)
        await wait_until_healthy(f"http://127.0.0.1:{self.port}/healthz", process)
        return process

    def worker(
        self, dyno: str, *, name: str | None = None, netns: str | None = None, **env: str
    ) -> Process:
        """A worker process on `dyno`; `name` tells two processes on one dyno apart; `netns`:
        the network namespace to run it in."""
        command = procfile()["worker"]
        process = Process(name or dyno, command, self.env(DYNO=dyno, **env), self.logs, netns=netns)
        self.processes.append(process)
        return process

    def older_worker(self, dyno: str, code: Path) -> Process:
        """A worker of another release's tree (`tests.support.processes.release`), as in a rolling
        deploy."""
        command = procfile()["worker"]
        env = self.env(DYNO=dyno)
        env["AGENTS"] = agents_in(code, env["AGENTS"])
        process = Process(dyno, command, env, self.logs, code=code)
        self.processes.append(process)
        return process

    async def __aenter__(self) -> Deployment:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        for process in self.processes:
            process.stop()
        await self.session.close()
        await self.model.stop()
        await self.slack.stop()
        await self.redis.aclose()
        self.slack.assert_nothing_refused()

    async def job_owner(self) -> str | None:
        """The dyno (`worker.1`) holding the first pending job, if any."""
        rows: Any = []
        for shard in self.keys.shards:
            rows.extend(await self.redis.xpending_range(shard.jobs, JOB_GROUP, "-", "+", 10))
        if not rows:
            return None
        dyno, _, _boot = rows[0]["consumer"].decode().rpartition(":")  # `worker.1:3f9a1c`
        return str(dyno)

    async def jobs_done(self, timeout: float = 10) -> None:
        await jobs_done(self.redis, self.keys, timeout)

    async def start_run(self, text: str) -> Message:
        roots = len(self.slack.roots())
        status, _ = await self.sender.command(text)
        assert status == 200
        await self.slack.wait_for(lambda: len(self.slack.roots()) > roots, 20, "root message")
        return self.slack.roots()[-1]

    async def cards(self, root: Message, count: int) -> list[Message]:
        def ready() -> list[Message] | None:
            found = [c for c in self.slack.cards() if c.thread_ts == root.ts]
            return found if len(found) >= count else None

        cards: list[Message] = await self.slack.wait_for(ready, 20, f"{count} card(s)")
        return cards

    async def final_answers(self, root: Message) -> list[Message]:
        answers: list[Message] = await self.slack.wait_for(
            lambda: self.slack.final_answers(root.ts), 20, "final answer"
        )
        return answers

    async def audit_entries(self) -> list[dict[bytes, bytes]]:
        """The whole audit trail, every shard's, in the order Redis wrote it."""
        return await audit_entries(self.redis, self.keys)

    def logs_text(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()}" for p in self.processes)


def what_failed(error: BaseException) -> str:
    """The failures in `error` (each of an exception group's, with its traceback), for the top
    of a note that goes on with the processes' logs: printed after so long a note, as Python
    prints a group's members, they are what a shortened CI log cuts off."""
    parts = error.exceptions if isinstance(error, BaseExceptionGroup) else (error,)
    return "".join("".join(traceback.format_exception(part)) for part in parts)


def agents_in(code: Path, agents: str) -> str:
    """`agents` (`module:attribute`) as that release's tree names it: the test agents moved from
    `tests/` to `tests/support/`, and an older release loads them from where it kept them."""
    module, _, attribute = agents.partition(":")
    path = code.joinpath(*module.split(".")).with_suffix(".py")
    if path.exists() or not module.startswith("tests.support."):
        return agents
    return f"tests.{module.removeprefix('tests.support.')}:{attribute}"
