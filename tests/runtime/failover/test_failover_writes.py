"""A worker's writes that die with a failed primary are redone, never acknowledged as done.

With `REDIS_MIN_REPLICAS=1` a job's steps write to the primary and are confirmed later (before a
card is posted, a tool runs, the job is acknowledged). If the primary dies in between and
Sentinel promotes a replica that never received those writes, the worker's next commands simply
reconnect to the new primary: without a check it would confirm there what the new primary has,
and acknowledge a job whose work is gone. These tests hold the replication link back
(`tests.support.replicated_redis`), let a job write, SIGKILL the primary and wait for the
promotion, and
show that the job runs again on the new primary, and that the delivery whose writes were lost
cannot write over the one that redid them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot.words import runs as messages
from runtime.db.client import connect_to
from runtime.db.keys import Keys
from runtime.db.replication import Replication
from runtime.jobs.consumer import JobConsumer
from runtime.jobs.queue import Delivery, JobQueue
from runtime.settings import RuntimeSettings
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, Reply, message, tool_call
from tests.support.processes import wait_for_log
from tests.support.replicated_redis import ReplicatedRedis


@pytest.fixture
async def replicated(tmp_path: Path) -> AsyncIterator[ReplicatedRedis]:
    servers = ReplicatedRedis(tmp_path / "redis")
    await servers.start()
    try:
        yield servers
    finally:
        await servers.stop()


async def fail_over(redis: ReplicatedRedis) -> None:
    """The primary dies with what the link held; the replica is promoted; the old one rejoins
    as its replica (so `WAIT 1` can be met again)."""
    redis.kill_primary()
    await redis.proxy.drop()
    await redis.wait_for_failover()
    redis.restart_old_primary()
    await redis.wait_for_replica()


async def eventually(check: Any, what: str, timeout: float = 30) -> None:
    """Until `check()` is true; a check that meets the failover asks again."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(RedisError):
            if await check():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.1)


async def test_a_job_whose_writes_died_with_the_primary_runs_again_before_it_is_acknowledged(
    replicated: ReplicatedRedis,
) -> None:
    settings = RuntimeSettings.from_environ(replicated.environ(1))
    client = connect_to(settings)
    keys = Keys("csfo:")
    replication = Replication.of(client, keys, min_replicas=1, wait_ms=500)
    queue = JobQueue(client, keys, replication=replication)
    work = f"{keys.prefix}work"
    tries: list[str] = []

    async def write_then_lose_it(delivery: Delivery) -> None:
        tries.append(delivery.entry_id)
        if len(tries) == 1:
            await replication.confirm()  # its delivery is on the replica: the job survives
            replicated.proxy.hold()
            await client.set(work, "done")  # reaches the primary only
            await fail_over(replicated)  # the worker makes no call meanwhile: nothing fails
            return
        await client.set(work, "done")

    async def nothing(_: Delivery) -> None: ...

    worker = JobConsumer(
        queue=queue,
        consumer="w",
        handler=write_then_lose_it,
        on_dead=nothing,
        concurrency=1,
        idle_timeout=30,
        max_deliveries=3,
    )
    await queue.ensure_group()
    await queue.enqueue("j", "job")
    task = asyncio.create_task(worker.run())
    try:

        async def settled() -> bool:
            return bool(await client.xlen(keys.jobs) == 0 and await client.get(work))

        await eventually(settled, "the job is acknowledged and its work is there")
    finally:
        worker.stop()
        await task
        await client.aclose()
    assert len(tries) == 2, "run again on the new primary, not acknowledged as done"
    assert tries[0] == tries[1], "the same delivery, tried again in place"


async def resend_until_started(deployment: Deployment, task: str, trigger: str) -> None:
    """As Slack resends a command (same trigger) and a person retries on "try again"."""
    for _ in range(20):
        status, body = await deployment.sender.command(task, trigger_id=trigger)
        if (status, body.get("text")) == (200, messages.command_starting("ops")):
            return
        await asyncio.sleep(0.5)
    raise AssertionError("the resent command was never acknowledged")


def script_held_until(release: asyncio.Event) -> Any:
    """The run's first model request waits for `release`; later ones answer at once."""
    seen = 0

    async def script(request: ModelRequest) -> Reply:
        nonlocal seen
        if request.tool_outputs:
            return [message(f"done: {request.tool_outputs['call_r1']}")]
        seen += 1
        if seen == 1:
            await release.wait()
        return [tool_call("restart_service", {"service": "api"}, "call_r1")]

    return script


@pytest.mark.chaos  # a Sentinel failover, about 40 s
async def test_a_start_resent_after_a_failover_shows_one_card_that_works(
    deployment: Deployment, replicated: ReplicatedRedis
) -> None:
    """A start whose first delivery wrote only to a primary that then died: Slack resends the
    command, the new primary runs it, and the first delivery, back from its model call, can
    neither write over the new run nor post a second card."""
    env = {**replicated.environ(1), "JOB_MAX_DELIVERIES": "20", "REMINDER_AT": "0"}
    release = asyncio.Event()
    deployment.model.script = script_held_until(release)
    await deployment.web(**env)
    worker = deployment.worker("worker.1", **env)
    await wait_for_log(worker, "worker ready", timeout=60)
    slack = deployment.slack

    await replicated.caught_up()  # the job stream's group is on the replica, as it would be
    replicated.proxy.hold()  # the replica hears nothing from here on
    status, body = await deployment.sender.command("restart api", trigger_id="trigger-fo")
    assert (status, body.get("text")) == (200, messages.RUN_NOT_CONFIRMED)
    # The worker runs it on the primary all the same, up to its model call.
    await slack.wait_for(lambda: deployment.model.requests, 20, "the first model call")
    await fail_over(replicated)

    await resend_until_started(deployment, "restart api", "trigger-fo")
    [card] = await slack.wait_for(lambda: slack.cards(), 30, "the card")
    release.set()  # the first delivery goes on, against the new primary

    def first_delivery_done() -> bool:
        return len(slack.cards()) > 1 or "this delivery stops" in worker.log_path.read_text()

    await slack.wait_for(first_delivery_done, 30, "the first delivery to stop")
    assert len(slack.cards()) == 1, "the first delivery posted no card of its own"
    status, _ = await deployment.sender.click(card, "approve", user="UBOB")
    assert status == 200
    await slack.wait_for(lambda: slack.final_answers(card.thread_ts or ""), 30, "the run's answer")
    [answer] = slack.final_answers(card.thread_ts or "")
    assert answer.text.startswith("done: "), answer.text
    ledger: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    assert len(ledger) == 1, "the tool ran once"
    primary: aioredis.Redis = replicated.primary_client()
    try:
        approved: Any = await primary.xrange(deployment.keys.audit)
        assert [f[b"event"] for _, f in approved].count(b"approved") == 1
    finally:
        await primary.aclose()


def migrate_script(request: ModelRequest) -> Reply:
    if "call_m1" in request.tool_outputs:
        return [message(f"done: {request.tool_outputs['call_m1']}")]
    return [tool_call("migrate", {"table": "users"}, "call_m1")]


@pytest.mark.chaos  # a Sentinel failover while a tool runs, about 30 s
async def test_a_tool_that_returns_after_a_failover_is_recorded_and_its_run_finishes(
    deployment: Deployment, replicated: ReplicatedRedis
) -> None:
    """The tool started on the old primary (its start mark confirmed by the replica) and
    returns once the replica is promoted: its output is recorded and held on the new primary,
    the job runs again there and reuses it. Before, each confirmation of that output failed
    "the primary changed" (the attempt is pinned to the old one) until JOB_TIMEOUT_SECONDS,
    and the run then asked whether to run the call again."""
    env = {
        **replicated.environ(1),
        "SLOW_TOOL_SECONDS": "6",
        "JOB_MAX_DELIVERIES": "20",
        "REMINDER_AT": "0",
    }
    deployment.model.script = migrate_script
    await deployment.web(**env)
    worker = deployment.worker("worker.1", **env)
    await wait_for_log(worker, "worker ready", timeout=60)
    slack = deployment.slack

    status, body = await deployment.sender.command("migrate users", trigger_id="trigger-mig")
    assert (status, body.get("text")) == (200, messages.command_starting("ops"))
    [card] = await slack.wait_for(lambda: slack.cards(), 30, "the card")
    status, _ = await deployment.sender.click(card, "approve", user="UBOB")
    assert status == 200

    async def started() -> bool:
        return bool(await deployment.redis.llen(deployment.ledger_key))

    await eventually(started, "the tool started")
    await fail_over(replicated)  # the tool is still sleeping; it returns to the new primary

    thread = card.thread_ts or ""
    await slack.wait_for(lambda: slack.final_answers(thread), 40, "the run's answer")
    [answer] = slack.final_answers(thread)
    assert answer.text.startswith("done: migrated users (attempt 1"), answer.text
    ledger: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    assert len(ledger) == 1, "the tool ran once"
    assert "recorded on the new Redis primary" in worker.log_path.read_text()
