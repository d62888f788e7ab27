"""A worker whose Redis (or every Sentinel) is gone still stops on SIGTERM within Heroku's 30 s
grace: idle, running an approved tool, or holding a tool's output it cannot record; also when
the whole test deployment around it is gone (a killed test run). Its job is never acknowledged
(it stays pending, for a takeover once Redis is back), and the log says in one plain line why
it stopped waiting."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.db.keys import JOB_GROUP
from runtime.db.local import RedisServer
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.processes import Process, wait_for_log
from tests.support.replicated_redis import ReplicatedRedis

HEROKU_GRACE = 30.0
"""Heroku's SIGKILL after SIGTERM; `SHUTDOWN_GRACE_SECONDS` (25 s) leaves the interpreter 5."""
NOT_HANDED_BACK = "none handed back: Redis is away"
OUTPUT_NOT_RECORDED = "output of call_migrate not recorded: cancelled while Redis was away"

# The tool's first attempt takes this long: it returns into the outage, or runs through it.
TOOL_PHASES = [
    pytest.param("2", 5.0, id="tool-returned-into-outage"),
    pytest.param("60", 3.0, id="tool-running"),
]


def migrate_then_answer(request: ModelRequest) -> list[dict[str, object]]:
    if not request.tool_outputs:
        return [tool_call("migrate", {"table": "users"}, "call_migrate")]
    return [message(request.tool_outputs["call_migrate"])]


async def seconds_to_exit(worker: Process) -> float:
    began = time.monotonic()
    worker.signal(signal.SIGTERM)
    await worker.wait(timeout=90)
    return time.monotonic() - began


async def approved_tool_started(deployment: Deployment, worker: Process) -> None:
    """`/agent`, Bob approves `migrate`, and the tool has begun (it writes the test ledger)."""
    root = await deployment.start_run("migrate users")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")
    await wait_for_log(worker, "resuming round 1", timeout=30)
    deadline = time.monotonic() + 30
    while not await deployment.redis.llen(deployment.ledger_key):
        assert time.monotonic() < deadline, deployment.logs_text()
        await asyncio.sleep(0.1)


async def pending_jobs(deployment: Deployment) -> int:
    rows: Any = await deployment.redis.xpending_range(
        deployment.keys.shards[0].jobs, JOB_GROUP, "-", "+", 10
    )
    return len(rows)


async def test_an_idle_worker_whose_redis_is_gone_stops_in_time_saying_why(
    durable_redis: RedisServer, tmp_path: Path
) -> None:
    async with Deployment(durable_redis.url, "idle:", tmp_path) as deployment:
        worker = deployment.worker("worker.1")
        await wait_for_log(worker, "worker ready", timeout=60)
        durable_redis.stop()
        await asyncio.sleep(5)  # its loops are retrying by now

        assert await seconds_to_exit(worker) < HEROKU_GRACE, worker.log()
        line = await wait_for_log(worker, NOT_HANDED_BACK)
        assert "check REDIS_URL" in line, line


@pytest.mark.chaos  # over 30 s each: a shutdown budget spent while Redis is away
@pytest.mark.parametrize(("tool_seconds", "away_before_sigterm"), TOOL_PHASES)
async def test_a_worker_whose_redis_went_away_during_a_tool_stops_in_time_keeping_the_job(
    durable_redis: RedisServer, tmp_path: Path, tool_seconds: str, away_before_sigterm: float
) -> None:
    async with Deployment(durable_redis.url, "away:", tmp_path) as deployment:
        deployment.model.script = migrate_then_answer
        await deployment.web()
        worker = deployment.worker("worker.1", SLOW_TOOL_SECONDS=tool_seconds)
        await approved_tool_started(deployment, worker)

        durable_redis.stop()
        await asyncio.sleep(away_before_sigterm)
        assert await seconds_to_exit(worker) < HEROKU_GRACE, worker.log()
        await wait_for_log(worker, NOT_HANDED_BACK)
        if tool_seconds == "2":
            await wait_for_log(worker, OUTPUT_NOT_RECORDED)

        durable_redis.start()
        await deployment.redis.connection_pool.disconnect()  # the test's own, closed by the stop
        assert await pending_jobs(deployment) == 1, "not acknowledged: left for a takeover"


@pytest.mark.chaos  # over 30 s: the same
async def test_a_worker_left_behind_by_a_killed_test_run_stops_in_time(
    durable_redis: RedisServer, tmp_path: Path
) -> None:
    """Redis, Slack, the model and the web all gone, as after a test run killed mid-tool."""
    deployment = Deployment(durable_redis.url, "orphan:", tmp_path)
    await deployment.start()
    try:
        deployment.model.script = migrate_then_answer
        web = await deployment.web()
        worker = deployment.worker("worker.1", SLOW_TOOL_SECONDS="2")
        await approved_tool_started(deployment, worker)

        durable_redis.stop()
        web.stop()
        await deployment.model.stop()
        await deployment.slack.stop()
        await asyncio.sleep(5)
        assert await seconds_to_exit(worker) < HEROKU_GRACE, worker.log()
        await wait_for_log(worker, OUTPUT_NOT_RECORDED)
        await wait_for_log(worker, NOT_HANDED_BACK)
    finally:
        for process in deployment.processes:
            process.stop()
        await deployment.session.close()
        await deployment.redis.aclose()


async def test_an_idle_worker_whose_sentinels_are_all_gone_stops_in_time_saying_why(
    deployment: Deployment, tmp_path: Path
) -> None:
    redis = ReplicatedRedis(tmp_path / "replicated")
    await redis.start()
    try:
        worker = deployment.worker("worker.1", **redis.environ(0))
        await wait_for_log(worker, "worker ready", timeout=60)
        await redis.stop()
        await asyncio.sleep(5)

        assert await seconds_to_exit(worker) < HEROKU_GRACE, worker.log()
        line = await wait_for_log(worker, NOT_HANDED_BACK)
        assert "check REDIS_SENTINELS, REDIS_SENTINEL_MASTER" in line, line
    finally:
        await redis.stop()


@pytest.mark.chaos  # over 30 s each: the same, with the Sentinels away
@pytest.mark.parametrize(("tool_seconds", "away_before_sigterm"), TOOL_PHASES)
async def test_a_worker_whose_sentinels_went_away_during_a_tool_stops_in_time(
    deployment: Deployment, tmp_path: Path, tool_seconds: str, away_before_sigterm: float
) -> None:
    redis = ReplicatedRedis(tmp_path / "replicated")
    await redis.start()
    try:
        env = redis.environ(0)
        deployment.model.script = migrate_then_answer
        await deployment.web(**env)
        worker = deployment.worker("worker.1", SLOW_TOOL_SECONDS=tool_seconds, **env)
        await wait_for_log(worker, "worker ready", timeout=60)
        await approved_tool_started(deployment, worker)

        await redis.stop()  # the primary, its replica and all three Sentinels
        await asyncio.sleep(away_before_sigterm)
        assert await seconds_to_exit(worker) < HEROKU_GRACE, worker.log()
        await wait_for_log(worker, NOT_HANDED_BACK)
        if tool_seconds == "2":
            await wait_for_log(worker, OUTPUT_NOT_RECORDED)
    finally:
        await redis.stop()
