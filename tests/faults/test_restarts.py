"""Deploys and restarts while approvals wait: buttons keep working, stored runs stay readable."""

from __future__ import annotations

import asyncio
import json

import pytest

from runtime.db.keys import Keys
from tests.conftest import on_cluster_too
from tests.support import agents
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


@on_cluster_too
async def test_web_and_worker_restart_while_an_approval_waits(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)

    await bot.stop_workers()
    await bot.stop_web()
    await bot.start_web()
    await bot.start_worker("after-deploy")

    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert len(agents.EXECUTIONS) == 1
    assert await bot.run_leftovers() == []


async def test_stored_runs_carry_our_versioned_envelope(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    run_id = card.actions()[0]["value"].split(":")[0]
    key = Keys(bot.prefix).run(run_id)

    envelope = json.loads(await bot.field(key, "envelope"))
    assert envelope["schema_version"] == 3
    assert envelope["root_agent"] == "ops"
    assert envelope["conversation"] == {
        "channel": "CGENERAL",
        "requester": "UALICE",
        "thread": root.ts,
        "reply_url": bot.slack.response_url("UALICE"),
    }
    [call] = envelope["calls"]
    assert (call["tool"], call["agent"], call["call_id"]) == ("delete_user", "ops", "call_del")
    assert (call["approvers"], call["quorum"], call["allow_always"]) == ([], 1, True)
    assert len(call["digest"]) == 64
    assert json.loads(call["arguments"]) == {"user_id": "u-100"}
    assert await bot.redis.hget(key, f"ts:{call['approval_id']}") == card.ts.encode()
    ttl = await bot.redis.ttl(key)
    assert 300 < ttl <= 300 + 86400, "kept past the deadline so the expiry can be handled"


async def break_stored_run(bot: Harness, field: str, change: dict[str, object]) -> None:
    [key] = [k async for k in bot.redis.scan_iter(match=f"{bot.prefix}run:*")]
    envelope = json.loads(await bot.field(key, "envelope"))
    envelope.update(change)
    await bot.redis.hset(key, field, json.dumps(envelope))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param({"root_agent": "retired"}, "agent is not available any more", id="agent-gone"),
        pytest.param({"schema_version": 99}, "saved by a different version", id="envelope-v99"),
    ],
)
async def test_a_deploy_that_cannot_resume_a_run_says_so_once_and_keeps_it(
    bot: Harness, change: dict[str, object], expected: str
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await break_stored_run(bot, "envelope", change)

    await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert expected in answer.text
    assert "Run `r" in answer.text
    assert agents.EXECUTIONS == []
    [key] = [k async for k in bot.redis.scan_iter(match=f"{bot.prefix}run:*")]
    # The thread is told first, then the record is closed: not an event, so poll.
    for _ in range(100):
        if await bot.redis.hget(key, "status") == b"failed":
            break
        await asyncio.sleep(0.05)
    assert await bot.redis.hget(key, "status") == b"failed", "kept for recovery"
    assert await bot.redis.ttl(key) > 0


async def test_a_state_the_sdk_cannot_read_is_reported_and_kept(bot: Harness) -> None:
    import zlib

    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    [key] = [k async for k in bot.redis.scan_iter(match=f"{bot.prefix}run:*")]
    state = json.loads(zlib.decompress(await bot.field(key, "state")))
    state["$schemaVersion"] = "0.1"
    await bot.redis.hset(key, "state", zlib.compress(json.dumps(state).encode()))

    await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert "saved state can't be resumed" in answer.text
    assert agents.EXECUTIONS == []
    assert await bot.redis.hget(key, "status") == b"failed"


ADDED_IN = {
    2: ("approvers", "quorum", "allow_always", "digest"),
    3: ("why", "preview", "params_schema", "allow_edit", "grant_max_seconds"),
}


@pytest.mark.parametrize("version", [1, 2])
async def test_a_run_stored_by_a_previous_envelope_version_still_resumes(
    bot: Harness, version: int
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    [key] = [k async for k in bot.redis.scan_iter(match=f"{bot.prefix}run:*")]
    envelope = json.loads(await bot.field(key, "envelope"))
    for call in envelope["calls"]:
        for later in range(version + 1, 4):
            for added in ADDED_IN[later]:
                del call[added]
    envelope["schema_version"] = version
    await bot.redis.hset(key, "envelope", json.dumps(envelope))

    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


async def test_a_deploy_that_removed_the_waiting_tool_says_so_once(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.stop_workers()
    await bot.start_worker("after-deploy", AGENTS="tests.support.agents:REGISTRY_AFTER_DEPLOY")

    await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert answer.text.startswith(
        ":x: This run waits on a tool its agent no longer offers (`delete_user` of agent ops)"
    )
    await asyncio.sleep(1.5)
    assert len(bot.slack.final_answers(root.ts)) == 1, "one message, no crash loop"
    assert agents.EXECUTIONS == []
    [key] = [k async for k in bot.redis.scan_iter(match=f"{bot.prefix}run:*")]
    assert await bot.redis.hget(key, "status") == b"failed", "kept for recovery"
