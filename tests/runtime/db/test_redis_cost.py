"""What idling costs in Redis commands, and that the savings keep deadlines on time: real
processes (the Procfile's), production timeouts."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.db.keys import JOB_GROUP
from runtime.db.local import RedisServer
from runtime.record import layout as rr
from tests.support.deployment import Deployment
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import wait_for_log
from tests.support.redis_cluster import LocalCluster

# The defaults a deployment runs with (the test deployment shortens the idle timeout).
PRODUCTION = {"JOB_IDLE_TIMEOUT_SECONDS": "30"}


async def commands_processed(redis: aioredis.Redis) -> int:
    """Commands Redis executed so far, a script's own calls included (as plans bill them)."""
    stats: Any = await redis.info("stats")
    return int(stats["total_commands_processed"])


async def idle_rate(redis: aioredis.Redis, seconds: float) -> float:
    before = await commands_processed(redis)
    await asyncio.sleep(seconds)
    after = await commands_processed(redis)
    return (after - before - 1) / seconds  # less the first INFO itself


async def test_an_idle_worker_and_web_send_at_most_one_command_a_second(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    async with Deployment(own_redis.url, "idle:", tmp_path) as deployment:
        worker = deployment.worker("worker.1", **PRODUCTION)
        await wait_for_log(worker, "worker ready")
        # Its first reads and tick; then windows long enough that a tick landing in one (five
        # commands, every 30 s) beside the job reads (two every 10 s) stays under the bound.
        await asyncio.sleep(2.0)
        worker_rate = await idle_rate(deployment.redis, 10.0)

        await deployment.web(**PRODUCTION)
        await asyncio.sleep(2.0)
        both_rate = await idle_rate(deployment.redis, 10.0)
    assert worker_rate <= 1.0, f"an idle worker sent {worker_rate:.2f} commands/s"
    assert both_rate - worker_rate <= 1.0, f"an idle web sent {both_rate - worker_rate:.2f}/s"


@pytest.mark.cluster
async def test_an_idle_worker_on_a_cluster_sends_at_most_one_command_a_second(
    tmp_path: Path,
) -> None:
    """Each of its sixteen shards has a job stream, due sets and a wake-up stream: scanning,
    polling or health-checking each on its own every few seconds costs several commands a
    second (5.2, with a web, before the workers' alive marks). A cluster of the test's own, so
    that its count is this worker's alone."""
    with LocalCluster(directory=tmp_path / "cluster") as cluster:
        nodes = [aioredis.Redis.from_url(node.url) for node in cluster.nodes]
        deployment = Deployment(cluster.url, "idle:", tmp_path, cluster=True)
        await deployment.start()
        try:
            worker = deployment.worker("worker.1", **PRODUCTION)
            await wait_for_log(worker, "worker ready")
            await asyncio.sleep(3.0)  # its first reads, ticks and scan of every shard
            before = [await commands_processed(node) for node in nodes]
            await asyncio.sleep(30.0)
            after = [await commands_processed(node) for node in nodes]
        finally:
            await deployment.stop()
            for node in nodes:
                await node.aclose()
    rate = (sum(after) - sum(before) - len(nodes)) / 30.0  # less the first INFOs
    assert rate <= 1.0, f"an idle worker on a cluster sent {rate:.2f} commands/s"


async def test_a_deadline_written_by_another_worker_expires_on_time(
    deployment: Deployment,
) -> None:
    """The worker that opened the approval dies; the other one, asleep for up to 5 min since
    nothing was due when it looked, is woken by the deadline and expires it within a second."""
    env = {**PRODUCTION, "APPROVAL_TTL_SECONDS": "3", "REMINDER_AT": "0"}
    deployment.model.script = delete_then_answer
    await deployment.web(**env)
    workers = {
        "worker.1": deployment.worker("worker.1", **env),
        "worker.2": deployment.worker("worker.2", **env),
    }
    for process in workers.values():
        await wait_for_log(process, "worker ready")
    await asyncio.sleep(1.0)  # both pollers looked at empty due sets, and sleep
    status, _ = await deployment.sender.command("delete u-100")
    assert status == 200
    await deployment.slack.wait_for(deployment.slack.roots, 20, "the run's first message")
    # No card is posted: the worker that writes the deadline still holds the job when killed.
    deployment.slack.hold("chat.postMessage")

    run_key, approval_id = await _opened_approval(deployment)
    owner = await _job_owner(deployment)
    workers[owner].signal(signal.SIGKILL)
    deadline = float(await deployment.redis.hget(run_key, rr.DEADLINE + approval_id) or 0)
    assert deadline - time.time() > 1.0, "killed before the deadline"

    expired = await _expired_at(deployment, timeout=deadline - time.time() + 10)
    assert 0 <= expired - deadline <= 1.0, f"expired {expired - deadline:.2f} s after its deadline"


async def _opened_approval(deployment: Deployment, timeout: float = 20) -> tuple[str, str]:
    """The run key and approval id, once the approval and its deadline are written."""
    stop = time.monotonic() + timeout
    while time.monotonic() < stop:
        members: Any = await deployment.redis.zrange(deployment.keys.deadlines, 0, -1)
        if members:
            run_id, _, approval_id = members[0].decode().partition(":")
            return deployment.keys.run(run_id), approval_id
        await asyncio.sleep(0.02)
    raise AssertionError(f"no approval opened:\n{deployment.logs_text()}")


async def _job_owner(deployment: Deployment) -> str:
    rows: Any = await deployment.redis.xpending_range(deployment.keys.jobs, JOB_GROUP, "-", "+", 10)
    assert len(rows) == 1, "the start job is held while its card waits for Slack"
    dyno, _, _boot = rows[0]["consumer"].decode().rpartition(":")
    return str(dyno)


async def _expired_at(deployment: Deployment, timeout: float) -> float:
    """Redis's time of the expiry, from the audit entry its script appended."""
    stop = time.monotonic() + timeout
    while time.monotonic() < stop:
        rows: Any = await deployment.redis.xrange(deployment.keys.audit)
        for _id, fields in rows:
            if fields[b"event"] == b"expired":
                return float(json.loads(fields[b"details"])["at"])
        await asyncio.sleep(0.05)
    raise AssertionError(f"never expired:\n{deployment.logs_text()}")


async def test_a_run_waiting_on_its_model_sends_no_command_meanwhile(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """A working run learns of a stop from the worker's one blocking read of the stops stream
    (`runtime.stops.listener`), not by asking Redis twice a second while its model thinks."""
    async with Deployment(own_redis.url, "busy:", tmp_path) as deployment:
        deployment.model.script = delete_then_answer
        deployment.model.delay = 8.0
        await deployment.web(**PRODUCTION)
        worker = deployment.worker("worker.1", **PRODUCTION)
        await wait_for_log(worker, "worker ready")
        status, _ = await deployment.sender.command("delete u-100")
        assert status == 200
        for _ in range(200):  # not a Slack event: poll
            if deployment.model.requests:
                break
            await asyncio.sleep(0.05)
        assert deployment.model.requests, "the model was called"
        await asyncio.sleep(1.0)  # the run's first writes, the watcher's first read
        rate = await idle_rate(deployment.redis, 5.0)
        assert not deployment.slack.cards(), "measured while the model call was in flight"
    assert rate <= 1.0, f"{rate:.2f} commands/s while one run waited on its model"
