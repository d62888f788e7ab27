"""The app's own messages: a person writes to it in a direct message (its Messages tab) and a
run starts as `/agent` would; its cards go to the approvers' channel, never only to the
requester, with a link each way; opening the tab shows the registry's agents as prompts."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from bot.blocks.batch import ACTION_APPROVE_ALL
from bot.words import messages_tab as words
from bot.words.members import OUTSIDE_REQUESTER
from bot.words.runs import SELF_APPROVAL_REFUSED
from tests.conftest import with_env
from tests.support import agents
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer

APPROVERS_CHANNEL = "CAPPROVALS"
RULE_CHANNEL = "CDBAPPROVE"
OTHER_ORG = {"team_id": "T0THERORG", "is_stranger": True}


def direct_message(text: str, *, user: str = "UALICE", **more: Any) -> dict[str, Any]:
    """A person's `message.im` event, as Slack sends it for the app's Messages tab."""
    return {
        "type": "message",
        "channel": f"D{user}",
        "user": user,
        "text": text,
        "ts": f"{time.time():.6f}",
        "event_ts": f"{time.time():.6f}",
        "channel_type": "im",
        **more,
    }


async def cards_in(bot: Harness, channel: str, count: int = 1) -> list[Message]:
    found: list[Message] = await bot.slack.wait_for(
        lambda: (
            (c := [m for m in bot.slack.cards() if m.channel == channel]) and len(c) >= count and c
        ),
        what=f"{count} card(s) in {channel}",
    )
    return found


def in_thread(bot: Harness, said: dict[str, Any]) -> list[str]:
    return [m.text for m in bot.slack.thread(said["channel"], said["ts"])]


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL, APPROVERS="UBOB")
async def test_a_direct_message_starts_a_run_whose_card_waits_in_the_approvers_channel(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    said = direct_message("delete u-100")
    status, _ = await bot.sender.event(said)
    assert status == 200

    [card] = await cards_in(bot, APPROVERS_CHANNEL)
    assert card.thread_ts is None, "a message of the approvers' channel, not a thread's"
    link_back = f"archives/DUALICE/p{said['ts'].replace('.', '')}"
    assert link_back in card.all_text(), "the card links back to the requester's thread"
    assert not [m for m in bot.slack.cards() if m.channel == "DUALICE"], "no card in the DM"
    waiting = await bot.slack.wait_for(
        lambda: [t for t in in_thread(bot, said) if "waits for a decision" in t],
        what="the waiting note in the requester's thread",
    )
    assert f"<#{APPROVERS_CHANNEL}>" in waiting[0]
    assert f"archives/{APPROVERS_CHANNEL}/p{card.ts.replace('.', '')}" in waiting[0]

    await bot.sender.click(card, "approve", user="UBOB")
    await bot.slack.wait_for(
        lambda: "done: deleted u-100" in in_thread(bot, said), what="the answer in the DM thread"
    )
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    trail = await bot.audit_until("approved")
    [started] = [e for e in trail if e["event"] == "started"]
    assert (started["requester"], started["task"]) == ("UALICE", "delete u-100")
    [approved] = [e for e in trail if e["event"] == "approved"]
    assert (approved["user_id"], approved["channel"]) == ("UBOB", APPROVERS_CHANNEL)


@with_env(
    APPROVAL_CHANNEL=APPROVERS_CHANNEL,
    APPROVERS="UBOB",
    POLICY=f'[[rule]]\ntool = "delete_*"\napprovers = ["UBOB"]\nchannel = "{RULE_CHANNEL}"\n',
)
async def test_the_rules_channel_wins_over_approval_channel(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    await bot.sender.event(direct_message("delete u-100"))
    [card] = await cards_in(bot, RULE_CHANNEL)
    assert not [m for m in bot.slack.cards() if m.channel == APPROVERS_CHANNEL]
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.audit_until("approved")


async def test_with_no_approvers_channel_the_run_is_refused_in_one_sentence(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    bot.model.script = delete_then_answer
    caplog.set_level(logging.WARNING, logger="bot.listeners")
    said = direct_message("delete u-100")
    await bot.sender.event(said)
    told = await bot.slack.wait_for(lambda: in_thread(bot, said), what="the refusal")
    assert told == [words.NO_APPROVAL_CHANNEL]
    assert words.NO_APPROVAL_CHANNEL.count(". ") == 0, "one sentence"
    assert "APPROVAL_CHANNEL" in words.NO_APPROVAL_CHANNEL
    assert any("set APPROVAL_CHANNEL" in r.getMessage() for r in caplog.records), "the admin's line"
    # `/agent` in the same direct message is refused the same way.
    status, answer = await bot.sender.command("delete u-100", user="UALICE", channel="DUALICE")
    assert (status, answer["text"]) == (200, words.NO_APPROVAL_CHANNEL)
    await bot.jobs_done()
    assert await bot.audit_entries() == [], "nothing enqueued, nothing started"
    assert bot.model.requests == []


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL)
async def test_the_requester_cannot_approve_their_own_call_in_the_approvers_channel(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    await bot.sender.event(direct_message("delete u-100"))
    [card] = await cards_in(bot, APPROVERS_CHANNEL)
    await bot.sender.click(card, "approve", user="UALICE")
    notes = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == "UALICE"], what="the refusal"
    )
    assert notes[-1]["text"] == SELF_APPROVAL_REFUSED
    assert notes[-1]["channel"] == APPROVERS_CHANNEL
    # Nor from the direct message, where the card is not: the decision script refuses a click
    # from anywhere but the card's channel.
    await bot.sender.click(
        Message("DUALICE", card.ts, card.text, card.blocks, None), "approve", user="UBOB"
    )
    await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == "UBOB"], what="bob told"
    )
    await bot.sender.click(card, "approve", user="UBOB")
    trail = await bot.audit_until("finished")
    assert [e["user_id"] for e in trail if e["event"] == "approved"] == ["UBOB"]
    assert [e["event"] for e in trail].count("denied") == 1, "alice's own click"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL)
async def test_opening_the_messages_tab_suggests_the_registrys_agents(bot: Harness) -> None:
    status, _ = await bot.sender.event(
        {"type": "app_home_opened", "user": "UALICE", "channel": "DUALICE", "tab": "messages"}
    )
    assert status == 200
    shown = await bot.slack.wait_for(
        lambda: bot.slack.agents.prompts.get("DUALICE"), what="suggested prompts"
    )
    assert shown["title"] == words.PROMPTS_TITLE
    titles = [p["title"] for p in shown["prompts"]]
    assert titles[0].startswith("ops: "), "the first agent, with its one line"
    assert 1 <= len(titles) <= words.PROMPTS_MOST
    [call] = bot.slack.calls_to("assistant.threads.setSuggestedPrompts")
    assert "thread_ts" not in call.args, "an agent_view app's prompts are the tab's"
    assert bot.slack.home_tabs == {}, "the Messages tab is not the Home tab"


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL)
async def test_the_apps_own_messages_edits_and_other_subtypes_start_nothing(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    for event in (
        direct_message("delete u-100", bot_id="B0001"),
        direct_message("delete u-100", subtype="bot_message"),
        direct_message("delete u-100", subtype="message_changed"),
        direct_message("delete u-100", subtype="message_deleted"),
        direct_message("", subtype="channel_join"),
    ):
        status, _ = await bot.sender.event(event)
        assert status == 200
    await bot.jobs_done()
    assert bot.slack.calls_to("chat.postMessage") == []
    assert await bot.audit_entries() == []


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL)
async def test_a_person_outside_the_workspace_starts_no_run_by_direct_message(
    bot: Harness,
) -> None:
    bot.slack.people["UEVE"] = OTHER_ORG
    bot.model.script = delete_then_answer
    said = direct_message("delete u-100", user="UEVE")
    await bot.sender.event(said)
    told = await bot.slack.wait_for(lambda: in_thread(bot, said), what="the refusal")
    assert told == [OUTSIDE_REQUESTER]
    await bot.jobs_done()
    assert await bot.audit_entries() == []
    assert json.dumps(bot.model.requests, default=str) == "[]"


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL, STREAMING="on")
async def test_the_session_of_a_direct_messages_run_is_its_thread_titled_with_the_task(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    said = direct_message("delete u-100")
    await bot.sender.event(said)
    await cards_in(bot, APPROVERS_CHANNEL)
    session = await bot.slack.wait_for(
        lambda: bot.slack.agents.session("DUALICE", said["ts"]), what="the thread's session"
    )
    assert session.title == "delete u-100"
    await bot.slack.wait_for(lambda: session.status == "suspended", what="waiting: suspended")


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL, APPROVERS="UBOB")
async def test_the_approvers_home_tab_points_at_the_card_in_the_approvers_channel(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    await bot.sender.event(direct_message("delete u-100"))
    [card] = await cards_in(bot, APPROVERS_CHANNEL)
    await bot.sender.event({"type": "app_home_opened", "user": "UBOB", "tab": "home"})

    def listed() -> str:
        text = json.dumps(bot.slack.home_tabs.get("UBOB", {}))
        return text if "delete_user" in text else ""

    home = await bot.slack.wait_for(listed, what="bob's Home tab listing the call")
    assert f"archives/{APPROVERS_CHANNEL}/p{card.ts.replace('.', '')}" in home
    assert f"<#{APPROVERS_CHANNEL}>" in home and "DUALICE" not in home


def delete_two(request: ModelRequest) -> list[Item]:
    if not request.tool_outputs:
        return [
            tool_call("delete_user", {"user_id": "u-100"}, "c1"),
            tool_call("delete_user", {"user_id": "u-101"}, "c2"),
        ]
    return [message("done")]


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL, APPROVERS="UBOB")
async def test_the_requesters_thread_offers_no_approve_all_for_calls_decided_elsewhere(
    bot: Harness,
) -> None:
    bot.model.script = delete_two
    said = direct_message("delete u-100 and u-101")
    await bot.sender.event(said)
    await cards_in(bot, APPROVERS_CHANNEL, 2)
    [status] = await bot.slack.wait_for(
        lambda: [m for m in bot.slack.status_messages(said["ts"]) if "Waiting" in m.text],
        what="the status message saying the run waits",
    )
    assert ACTION_APPROVE_ALL not in status.action_ids()
    assert "stop_run" in status.action_ids(), "its Stop stays"


@with_env(APPROVAL_CHANNEL=APPROVERS_CHANNEL, APPROVERS="UBOB", STREAMING="on")
async def test_a_decided_task_in_the_requesters_thread_links_to_the_card_where_it_is(
    bot: Harness,
) -> None:
    """The card is in the approvers' channel, not in the direct message's thread: the waiting
    task and the next stretch's task link there."""
    bot.slack.users["UBOB"] = "bob"
    bot.model.script = delete_then_answer
    said = direct_message("delete u-100")
    await bot.sender.event(said)
    [card] = await cards_in(bot, APPROVERS_CHANNEL)
    where = f"https://console.localhost/archives/{APPROVERS_CHANNEL}/p{card.ts.replace('.', '')}"
    [waiting] = await bot.slack.wait_for(
        lambda: [
            m for m in bot.slack.thread("DUALICE", said["ts"]) if m.streamed and not m.streaming
        ],
        what="the waiting stretch's stream, stopped",
    )
    assert [s["url"] for s in waiting.tasks[0]["sources"]] == [where]

    await bot.sender.click(card, "approve", user="UBOB")
    streamed = await bot.slack.wait_for(
        lambda: [
            m
            for m in bot.slack.thread("DUALICE", said["ts"])
            if m.streamed and not m.streaming and any(t["status"] == "complete" for t in m.tasks)
        ],
        what="the second stretch's stream, stopped",
    )
    [link] = streamed[-1].tasks[0]["sources"]
    assert link["url"] == (
        f"https://console.localhost/archives/{APPROVERS_CHANNEL}/p{card.ts.replace('.', '')}"
    ), "the card where it is, in the approvers' channel"
