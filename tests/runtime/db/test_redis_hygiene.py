"""A Redis that is not fit to keep runs, on real processes: one that may evict keys, one that is
full and refuses writes, one emptied under a running web and worker."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis

from runtime.db.keys import JOB_GROUP
from runtime.db.local import RedisServer, free_port
from tests.support.deployment import Deployment
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import Process, wait_for_lines, wait_for_log

JOB_MAX_DELIVERIES = 3


async def readyz(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/readyz") as response:
        body: dict[str, Any] = await response.json()
        return response.status, body


async def readyz_until(url: str, status: int, process: Process) -> dict[str, Any]:
    """The body of `url`'s /readyz once it answers `status` (the worker's starts late)."""
    for _ in range(200):
        try:
            answered, body = await readyz(url)
        except aiohttp.ClientError:
            answered, body = 0, {}
        if answered == status:
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"{process.name} never answered {status} on /readyz:\n{process.log()}")


def configure(server: RedisServer, **config: str) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        for name, value in config.items():
            client.config_set(name.replace("_", "-"), value)
    finally:
        client.close()


async def test_a_redis_that_may_evict_keys_fails_readiness_of_both_processes(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    configure(own_redis, maxmemory_policy="allkeys-lru")
    async with Deployment(own_redis.url, "evicting:", tmp_path) as deployment:
        web = await deployment.web()
        worker_port = free_port()
        worker = deployment.worker("worker.1", METRICS_PORT=str(worker_port))
        urls = {
            web: f"http://127.0.0.1:{deployment.port}",
            worker: f"http://127.0.0.1:{worker_port}",
        }
        for process, url in urls.items():
            body = await readyz_until(url, 503, process)
            assert body["maxmemory_policy"] == "allkeys-lru", body
            assert "noeviction" in body["error"], body
            line = await wait_for_log(process, "maxmemory-policy allkeys-lru")
            assert "Set maxmemory-policy to noeviction" in line, line

        configure(own_redis, maxmemory_policy="noeviction")
        for process, url in urls.items():
            body = await readyz_until(url, 200, process)
            assert body == {"ok": True, "redis": "reachable", "scripts": "loaded"}
            said = [line for line in process.log().splitlines() if "allkeys-lru" in line]
            assert len(said) == 1, f"one line, not one per probe: {said}"
        assert "Traceback" not in deployment.logs_text()


async def test_a_redis_that_hides_config_gets_a_warning_not_a_failure(tmp_path: Path) -> None:
    server = RedisServer(
        directory=tmp_path / "redis", extra_args=["--rename-command", "CONFIG", ""]
    )
    server.start()
    deployment = Deployment(server.url, "managed:", tmp_path)
    await deployment.start()
    try:
        web = await deployment.web()
        body = await readyz_until(f"http://127.0.0.1:{deployment.port}", 200, web)
        assert body["maxmemory_policy"] == "unknown", body
        line = await wait_for_log(web, "maxmemory-policy")
        assert "make sure it is noeviction" in line, line
    finally:
        await deployment.stop()
        server.stop()


async def test_a_full_redis_asks_for_a_retry_and_acknowledges_nothing_it_did_not_store(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    async with Deployment(own_redis.url, "full:", tmp_path) as deployment:
        deployment.model.script = delete_then_answer
        await deployment.web()
        deployment.worker("worker.1")
        root = await deployment.start_run("delete u-100")
        [card] = await deployment.cards(root, 1)
        # The card is posted before its job is done and acknowledged: wait for that, so that
        # what is left in the stream afterwards is the refused start's or click's alone.
        deadline = time.monotonic() + 10
        while await deployment.redis.xlen(deployment.keys.jobs):
            assert time.monotonic() < deadline, "the first start's job was never acknowledged"
            await asyncio.sleep(0.05)

        configure(own_redis, maxmemory="1")  # noeviction, as it should be: writes are refused
        status, body = await deployment.sender.command("delete u-200")
        assert status == 200
        assert "nothing was started. Please try again" in body["text"], body
        status, _ = await deployment.sender.click(card, "approve", user="UBOB")
        assert status == 200
        note = await deployment.slack.wait_for(lambda: deployment.slack.ephemerals, 10, "note")
        assert "your decision was not recorded" in note[0]["text"]
        assert "please try again" in note[0]["text"]
        assert card.action_ids() == [
            "approve",
            "approve_note",
            "approve_always",
            "reject",
            "answer",
        ], "buttons stay"
        jobs: Any = await deployment.redis.xlen(deployment.keys.jobs)
        assert jobs == 0, "neither the refused start nor the refused click left a job"

        configure(own_redis, maxmemory="0")
        await deployment.sender.click(card, "approve", user="UBOB")
        [answer] = await deployment.final_answers(root)
        assert answer.text == "done: deleted u-100"
        assert len(deployment.slack.roots()) == 1, "the refused /agent never started later"
        assert "Traceback" not in deployment.logs_text()


def flush_all(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        client.flushall()
    finally:
        client.close()


def restart_empty(server: RedisServer) -> None:
    server.stop()  # it keeps no files: it starts again with nothing
    server.start()


@pytest.mark.parametrize("empty", [flush_all, restart_empty], ids=["flushall", "restarted"])
async def test_after_redis_is_emptied_the_next_agent_starts_within_seconds(
    own_redis: RedisServer, tmp_path: Path, empty: Callable[[RedisServer], None]
) -> None:
    async with Deployment(own_redis.url, "emptied:", tmp_path) as deployment:
        deployment.model.script = delete_then_answer
        await deployment.web()
        worker = deployment.worker("worker.1")
        await wait_for_log(worker, "worker ready")
        first = await deployment.start_run("delete u-100")
        await deployment.cards(first, 1)

        empty(own_redis)
        asked = len(deployment.model.requests)
        started = time.monotonic()
        root = await deployment.start_run("delete u-100")
        # Timed to the worker taking the job (its first model request), not to the card: the
        # card's further hops through the fake model and Slack stretch with the machine's load
        # and say nothing of whether the worker found the stream again by itself.
        await deployment.slack.wait_for(
            lambda: len(deployment.model.requests) > asked, 30, "the worker to take the job"
        )
        assert time.monotonic() - started < 8, "started within seconds, no restart needed"
        [card] = await deployment.cards(root, 1)
        await deployment.sender.click(card, "approve", user="UBOB")
        [answer] = await deployment.final_answers(root)
        assert answer.text == "done: deleted u-100"

        said = [
            line
            for line in deployment.logs_text().splitlines()
            if "the job stream" in line and "was lost" in line
        ]
        assert len(said) == 1, said
        groups: Any = await deployment.redis.xinfo_groups(deployment.keys.jobs)
        assert [g["name"] for g in groups] == [JOB_GROUP.encode()]


@pytest.fixture
def redis_of_either_binary(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of the test's own, on either binary: 6.2 says "full" inside a Lua script
    another way."""
    with RedisServer(directory=tmp_path / "redis", binary=redis_binary) as server:
        yield server


async def test_a_run_started_while_redis_is_full_waits_for_room_and_is_not_given_up(
    redis_of_either_binary: RedisServer, tmp_path: Path
) -> None:
    own_redis = redis_of_either_binary
    async with Deployment(own_redis.url, "filling:", tmp_path) as deployment:
        deployment.model.script = delete_then_answer
        await deployment.web()
        worker = deployment.worker("worker.1", JOB_MAX_DELIVERIES=str(JOB_MAX_DELIVERIES))
        await wait_for_log(worker, "worker ready")
        worker.signal(signal.SIGSTOP)  # so that the job is stored before Redis fills up
        status, body = await deployment.sender.command("delete u-100")
        assert status == 200 and "Starting" in body["text"], body
        configure(own_redis, maxmemory="1")
        worker.signal(signal.SIGCONT)
        # Tried, and kept, more often than a job may be delivered: counted in the worker's
        # log rather than assumed from a pause, which a loaded machine fills with fewer tries.
        await wait_for_lines(worker, "kept, and tried again", JOB_MAX_DELIVERIES + 1, 60)

        configure(own_redis, maxmemory="0")
        [root] = await deployment.slack.wait_for(lambda: deployment.slack.roots(), 20, "root")
        [card] = await deployment.cards(root, 1)
        await deployment.sender.click(card, "approve", user="UBOB")
        [answer] = await deployment.final_answers(root)
        assert answer.text == "done: deleted u-100"
        dead: Any = await deployment.redis.xlen(deployment.keys.dead_jobs)
        assert dead == 0, "the job was kept, not dead-lettered"
