"""Policy-file rules: quorum, auto-approve and auto-reject, and approvals bound to the call."""

from __future__ import annotations

import asyncio
import json
import zlib
from pathlib import Path

import pytest

from tests.runtime.deciders.test_approvers import card_for, ephemeral_for
from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness

POLICY = """
[[rule]]
tool = "delete_*"
approvers = ["S0SRE"]
quorum = 2

[[rule]]
tool = "restart_*"
auto = "approve"

[[rule]]
tool = "explode"
auto = "reject"
"""


@pytest.fixture
def env_overrides(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return {"POLICY_FILE": str(path)}


async def test_quorum_of_two_waits_for_a_second_approver(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL", "UDAVE", "UERIN"]}
    root, card = await card_for(bot)
    assert card.action_ids() == ["approve", "approve_note", "reject", "answer"], (
        "no 'Approve always' under a quorum"
    )
    assert "0 of 2 approvals: <!subteam^S0SRE> can approve" in card.all_text()

    await bot.sender.click(card, "approve", user="UCAROL")
    await bot.slack.wait_for(
        lambda: "1 of 2 approvals: <@UCAROL> approved; <!subteam^S0SRE> can" in card.all_text(),
        what="1/2",
    )
    assert card.action_ids() == ["approve", "approve_note", "reject", "answer"], "still open"
    await bot.sender.click(card, "approve", user="UCAROL")
    assert "You already approved this" in await ephemeral_for(bot, "UCAROL")
    await asyncio.sleep(0.2)
    assert agents.EXECUTIONS == [] and len(bot.model.requests) == 1

    await bot.sender.click(card, "approve", user="UDAVE")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert "<@UCAROL> and <@UDAVE> approved" in card.all_text()
    assert len(agents.EXECUTIONS) == 1


async def test_one_rejection_during_a_quorum_rejects(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL", "UDAVE"]}
    root, card = await card_for(bot)
    await bot.sender.click(card, "approve", user="UCAROL")
    await bot.slack.wait_for(lambda: "1 of 2 approvals" in card.all_text(), what="1/2")
    await bot.sender.reject(card, user="UDAVE", reason="wrong user")
    answer = await bot.final_answer(root)
    assert "rejected by udave (UDAVE). Reason: wrong user" in answer.text
    assert agents.EXECUTIONS == []


async def test_policy_rules_approve_and_reject_without_asking(bot: Harness) -> None:
    def script(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [
                tool_call("restart_service", {"service": "api"}, "c_restart"),
                tool_call("explode", {}, "c_boom"),
            ]
        return [message(" | ".join(request.tool_outputs[c] for c in ("c_restart", "c_boom")))]

    bot.model.script = script
    root = await bot.start_run("list and explode")
    answer = await bot.final_answer(root)
    assert answer.text == (
        "restarted api | The call to explode was not run: the approval policy does not allow it."
    )
    assert bot.slack.cards() == []
    assert [tool for tool, _ in agents.EXECUTIONS] == ["restart_service"]
    trail = await bot.audit_until("finished")
    events = {e["event"] for e in trail}
    assert {"auto_approved", "auto_rejected"} <= events


async def test_an_approved_call_that_changed_before_it_ran_is_refused(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL", "UDAVE"]}
    root, card = await card_for(bot)
    # Someone with write access to Redis edits the call's arguments, and removes the SDK's own
    # fingerprint of the call so that the SDK cannot notice.
    [key] = [k async for k in bot.redis.scan_iter(match=f"{bot.prefix}run:*")]
    state = json.loads(
        zlib.decompress(await bot.field(key, "state")).decode().replace("u-100", "u-999")
    )
    del state["context"]["tool_invocations"]["call_del"]
    await bot.redis.hset(key, "state", zlib.compress(json.dumps(state).encode()))

    await bot.sender.click(card, "approve", user="UCAROL")
    await bot.sender.click(card, "approve", user="UDAVE")
    answer = await bot.final_answer(root)
    assert "its arguments changed after it was approved" in answer.text
    assert agents.EXECUTIONS == []
    [note] = bot.slack.notes(root.ts)
    assert note.text.startswith(":warning: `delete_user` was approved, but the call changed")
    trail = await bot.audit_until("finished")
    [refused] = [e for e in trail if e["event"] == "refused"]
    [requested] = [e for e in trail if e["event"] == "requested"]
    assert refused["digest"] == requested["digest"]


async def test_a_state_edited_clumsily_is_caught_by_the_sdk_and_reported_once(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL", "UDAVE"]}
    root, card = await card_for(bot)
    [key] = [k async for k in bot.redis.scan_iter(match=f"{bot.prefix}run:*")]
    raw = zlib.decompress(await bot.field(key, "state")).decode()
    await bot.redis.hset(key, "state", zlib.compress(raw.replace("u-100", "u-999").encode()))

    await bot.sender.click(card, "approve", user="UCAROL")
    await bot.sender.click(card, "approve", user="UDAVE")
    answer = await bot.final_answer(root)
    assert "the stored run state is inconsistent" in answer.text
    await bot.jobs_done()
    assert len(bot.slack.final_answers(root.ts)) == 1
    assert agents.EXECUTIONS == []
