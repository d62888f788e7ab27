"""The Procfile's `web` and `worker`, as real processes: restarts and a killed worker."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from runtime.keys import JOB_GROUP, Keys
from runtime.local_redis import free_port
from tests.fake_openai import FakeOpenAI, ModelRequest, message, tool_call
from tests.fake_slack import FakeSlack, Message
from tests.harness import SIGNING_SECRET, bot_environ
from tests.model_scripts import delete_then_answer
from tests.processes import Process, procfile, wait_until_healthy
from tests.slack_requests import SlackSender


class Deployment:
    """A Slack, a model, and the Procfile's processes, like a small Heroku app."""

    def __init__(self, redis_url: str, prefix: str, logs: Path) -> None:
        self.slack = FakeSlack()
        self.model = FakeOpenAI()
        self.redis_url = redis_url
        self.keys = Keys(prefix)
        self.prefix = prefix
        self.logs = logs
        self.port = free_port()
        self.processes: list[Process] = []
        self.redis = aioredis.Redis.from_url(redis_url)
        self.session: aiohttp.ClientSession
        self.sender: SlackSender

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **bot_environ(slack=self.slack, redis_url=self.redis_url, prefix=self.prefix),
            "PORT": str(self.port),
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": self.model.url,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            **extra,
        }

    async def start(self) -> None:
        await self.slack.start()
        await self.model.start()
        self.session = aiohttp.ClientSession()
        self.sender = SlackSender(
            self.session, f"http://127.0.0.1:{self.port}/slack/events", SIGNING_SECRET, self.slack
        )

    async def web(self) -> Process:
        process = Process("web", procfile()["web"], self.env(), self.logs)
        self.processes.append(process)
        await wait_until_healthy(f"http://127.0.0.1:{self.port}/healthz", process)
        return process

    def worker(self, dyno: str) -> Process:
        process = Process(dyno, procfile()["worker"], self.env(DYNO=dyno), self.logs)
        self.processes.append(process)
        return process

    async def stop(self) -> None:
        for process in self.processes:
            process.stop()
        await self.session.close()
        await self.model.stop()
        await self.slack.stop()
        await self.redis.aclose()

    async def job_owner(self) -> str | None:
        rows: Any = await self.redis.xpending_range(self.keys.jobs, JOB_GROUP, "-", "+", 10)
        return rows[0]["consumer"].decode() if rows else None

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

    def logs_text(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()}" for p in self.processes)


@pytest.fixture
async def deployment(redis_url: str, prefix: str, tmp_path: Path) -> AsyncIterator[Deployment]:
    deployment = Deployment(redis_url, prefix, tmp_path)
    await deployment.start()
    try:
        yield deployment
    finally:
        await deployment.stop()


async def test_both_processes_restart_while_an_approval_waits(deployment: Deployment) -> None:
    deployment.model.script = delete_then_answer
    web = await deployment.web()
    worker = deployment.worker("worker.1")
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)

    web.signal(signal.SIGTERM)
    worker.signal(signal.SIGTERM)
    assert await web.wait(timeout=30) == 0, web.log()
    assert await worker.wait(timeout=30) == 0, worker.log()

    await deployment.web()
    deployment.worker("worker.1")
    status, _ = await deployment.sender.click(card, "approve", user="UBOB")
    assert status == 200
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    assert "Approved by <@UBOB>" in card.all_text()


async def test_a_worker_killed_mid_run_is_replaced_by_another(deployment: Deployment) -> None:
    first_call = asyncio.Event()

    async def slow_first_call(request: ModelRequest) -> list[dict[str, object]]:
        if len(deployment.model.requests) == 1:
            first_call.set()
            await asyncio.sleep(30)  # the worker waiting for this is killed meanwhile
        return delete_then_answer(request)

    deployment.model.script = slow_first_call
    await deployment.web()
    workers = {name: deployment.worker(name) for name in ("worker.1", "worker.2")}
    root = await deployment.start_run("delete u-100")
    await asyncio.wait_for(first_call.wait(), timeout=20)
    owner = await deployment.job_owner()
    assert owner in workers, deployment.logs_text()
    workers[owner].signal(signal.SIGKILL)

    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    await asyncio.sleep(0.5)
    assert len(deployment.slack.roots()) == 1
    assert len(deployment.slack.final_answers(root.ts)) == 1
    assert len(deployment.slack.cards()) == 1


async def test_the_bundled_agents_use_the_openai_settings_of_the_environment(
    deployment: Deployment,
) -> None:
    def restart_api(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call("restart_service", {"service": "api"}, "c1")]
        return [message(request.tool_outputs["c1"])]

    deployment.model.script = restart_api
    process = Process("web", procfile()["web"], deployment.env(AGENTS=""), deployment.logs)
    deployment.processes.append(process)
    await wait_until_healthy(f"http://127.0.0.1:{deployment.port}/healthz", process)
    worker = Process("worker.1", procfile()["worker"], deployment.env(AGENTS=""), deployment.logs)
    deployment.processes.append(worker)

    root = await deployment.start_run("restart the api")
    [card] = await deployment.cards(root, 1)
    assert "*ops* wants to run `restart_service`" in card.all_text()
    await deployment.sender.click(card, "approve", user="UBOB")
    [answer] = await deployment.final_answers(root)
    assert answer.text == "Restarted api (restart #1)."
    assert {r.authorization for r in deployment.model.requests} == {"Bearer sk-test"}
    assert "restart_service" in deployment.model.requests[0].tools


async def test_a_missing_setting_stops_the_process_with_the_fix(
    deployment: Deployment, tmp_path: Path
) -> None:
    env = deployment.env(SLACK_SIGNING_SECRET="", APPROVAL_TTL_SECONDS="soon")
    process = Process("web-misconfigured", procfile()["web"], env, tmp_path)
    deployment.processes.append(process)
    assert await process.wait(timeout=20) == 2
    log = process.log()
    assert "SLACK_SIGNING_SECRET is not set. Copy the Signing Secret" in log
    assert "APPROVAL_TTL_SECONDS is invalid" in log
    assert "Traceback" not in log
