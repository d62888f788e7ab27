"""Clicks that race, repeat, or were never ours: first decision wins, nothing else is recorded."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.slack_requests import signature_headers


async def waiting_card(bot: Harness) -> tuple[Message, Message]:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    return root, card


async def test_twenty_concurrent_clicks_run_the_tool_once(bot: Harness) -> None:
    root, card = await waiting_card(bot)
    users = [f"U{n:04d}" for n in range(20)]
    results = await asyncio.gather(
        *(
            bot.sender.click(card, "approve" if n % 2 else "approve_always", user=u)
            for n, u in enumerate(users)
        )
    )
    assert all(status == 200 for status, _ in results)

    await bot.final_answer(root)
    await bot.slack.wait_for(lambda: len(bot.slack.ephemerals) >= 19, what="19 refusals")
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    assert len([r for r in bot.model.requests if r.tool_outputs]) == 1, "resumed exactly once"
    winners = {e["user"] for e in bot.slack.ephemerals}
    assert len(winners) == 19
    [winner] = set(users) - winners
    assert all(f"by <@{winner}>" in e["text"] for e in bot.slack.ephemerals)
    assert f"<@{winner}> approved" in card.all_text()


async def test_a_repeated_click_by_the_same_person_is_not_an_error(bot: Harness) -> None:
    root, card = await waiting_card(bot)
    payload = bot.sender.click_payload(card, "approve", user="UBOB")
    first, second = await asyncio.gather(bot.sender.interact(payload), bot.sender.interact(payload))
    assert first[0] == second[0] == 200
    await bot.final_answer(root)
    assert bot.slack.ephemerals == []
    assert len(agents.EXECUTIONS) == 1


async def test_a_click_on_a_finished_run_is_refused(bot: Harness) -> None:
    root, card = await waiting_card(bot)
    # Bob's screen still shows the buttons when he clicks.
    stale = bot.sender.click_payload(card, "approve", user="UBOB")
    await bot.sender.reject(card, user="UCAROL", reason="no")
    await bot.final_answer(root)

    status, _ = await bot.sender.interact(stale)
    assert status == 200
    note = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="ephemeral")
    assert note[0]["user"] == "UBOB"
    assert "run has finished" in note[0]["text"]
    assert agents.EXECUTIONS == []


async def test_already_decided_while_the_run_waits_for_another_call(bot: Harness) -> None:
    def two_calls(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [
                tool_call("delete_user", {"user_id": "u-1"}, "c1"),
                tool_call("delete_user", {"user_id": "u-2"}, "c2"),
            ]
        return [message("ok")]

    bot.model.script = two_calls
    root = await bot.start_run("delete two")
    first, _second = await bot.cards(root, 2)
    stale = bot.sender.click_payload(first, "approve_always", user="UBOB")
    await bot.sender.click(first, "approve", user="UCAROL")
    await bot.sender.interact(stale)
    note = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="ephemeral")
    assert note[0]["text"] == "This was already approved by <@UCAROL>; nothing changed."
    assert note[0]["thread_ts"] == root.ts


async def test_forged_and_stale_signatures_are_refused(bot: Harness) -> None:
    _root, card = await waiting_card(bot)
    body = "payload=" + json.dumps(bot.sender.click_payload(card, "approve", user="UEVE"))

    forged = signature_headers("not-the-secret", body)
    assert (await bot.sender.post(body, forged))[0] == 401
    stale = signature_headers(bot.sender.secret, body, timestamp=int(time.time()) - 600)
    assert (await bot.sender.post(body, stale))[0] == 401
    unsigned = {"Content-Type": "application/x-www-form-urlencoded"}
    assert (await bot.sender.post(body, unsigned))[0] == 401

    await asyncio.sleep(0.2)
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    assert agents.EXECUTIONS == []
    assert len(bot.model.requests) == 1


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("garbage", id="not-a-reference"),
        pytest.param("r0000000000000000:a0000000000", id="unknown-run"),
        pytest.param("{run}:a0000000000", id="unknown-approval"),
        pytest.param("{run}:{approval}:extra", id="extra-part"),
        pytest.param("x" * 1999, id="huge"),
        pytest.param("", id="empty"),
    ],
)
async def test_tampered_button_values_record_nothing(bot: Harness, value: str) -> None:
    root, card = await waiting_card(bot)
    run_id, approval_id = card.actions()[0]["value"].split(":")[:2]
    value = value.format(run=run_id, approval=approval_id)

    status, _ = await bot.sender.click(card, "approve", user="UEVE", value=value)
    assert status == 200
    note = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="ephemeral")
    assert note[0]["user"] == "UEVE"
    assert "nothing was recorded" in note[0]["text"].lower()
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]

    await bot.sender.click(card, "approve", user="UBOB")  # the real decision still works
    await bot.final_answer(root)
    assert len(agents.EXECUTIONS) == 1


async def test_ids_replayed_from_another_channel_are_refused(bot: Harness) -> None:
    _root, card = await waiting_card(bot)
    payload = bot.sender.click_payload(card, "approve", user="UEVE")
    payload["channel"]["id"] = "COTHER"
    payload["container"]["channel_id"] = "COTHER"
    await bot.sender.interact(payload)
    note = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="ephemeral")
    assert "not open" in note[0]["text"]
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]


async def test_unknown_actions_and_payload_types_are_answered_quietly(bot: Harness) -> None:
    _root, card = await waiting_card(bot)
    payload = bot.sender.click_payload(card, "approve", user="UEVE")
    payload["actions"][0]["action_id"] = "launch_missiles"
    assert (await bot.sender.interact(payload))[0] == 200
    assert (await bot.sender.interact({"type": "shortcut", "callback_id": "x"}))[0] in (200, 404)
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        pytest.param('{"type": "event_callback", "event": null}', "application/json", id="event"),
        pytest.param("[1, 2]", "application/json", id="not-an-object"),
        pytest.param("{not json", "application/json", id="not-json"),
        pytest.param(
            "payload=" + json.dumps({"type": "block_actions", "user": False, "actions": [{}]}),
            "application/x-www-form-urlencoded",
            id="user-false",
        ),
        pytest.param(
            "payload=" + json.dumps({"type": "view_submission", "view": {"state": None}}),
            "application/x-www-form-urlencoded",
            id="view-without-type",
        ),
    ],
)
async def test_a_signed_body_slack_never_sends_is_a_400_not_a_500(
    bot: Harness, body: str, content_type: str
) -> None:
    headers = {**signature_headers(bot.sender.secret, body), "Content-Type": content_type}
    assert (await bot.sender.post(body, headers))[0] == 400
    unsigned = {"Content-Type": content_type}
    assert (await bot.sender.post(body, unsigned))[0] == 401
