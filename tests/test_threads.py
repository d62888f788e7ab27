"""Keep talking in the thread: a reply continues the run's conversation with its earlier turns,
an `app_mention` starts a run, and a reply while the run still waits starts nothing."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from bot.words import threads as words
from runtime.jobs.contracts import JOB, Conversation, StartJob, new_run_id
from tests.conftest import on_cluster_too, with_env
from tests.support import agents
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness


def reply(root: Message, text: str, *, user: str) -> dict[str, Any]:
    """A person's `message` event in the root's thread, as Slack sends it."""
    return {
        "type": "message",
        "channel": root.channel,
        "user": user,
        "text": text,
        "ts": f"{time.time():.6f}",
        "thread_ts": root.ts,
        "channel_type": "channel",
    }


def said_before(request: ModelRequest) -> list[tuple[str, str]]:
    """The conversation the model was given: (role, words) of each message item."""
    return [
        (str(item["role"]), str(item["content"]))
        for item in request.input
        if item.get("role") in ("user", "assistant") and isinstance(item.get("content"), str)
    ]


def remembers_then_deletes(request: ModelRequest) -> list[Item]:
    """Answer `hello` in words; asked to delete, ask for delete_user, then say how it went."""
    last = said_before(request)[-1][1] if said_before(request) else ""
    if request.tool_outputs:
        return [message("done: " + request.tool_outputs["call_del"])]
    if "delete" in last:
        return [tool_call("delete_user", {"user_id": "u-100"}, "call_del")]
    return [message(f"turn {len(said_before(request))}")]


async def answers(bot: Harness, root: Message, count: int) -> list[Message]:
    found: list[Message] = await bot.slack.wait_for(
        lambda: (a := bot.slack.final_answers(root.ts)) and len(a) >= count and a,
        what=f"{count} answers",
    )
    return found


@on_cluster_too
async def test_a_reply_in_the_thread_sees_the_earlier_turns_and_its_card_lands_there(
    bot: Harness,
) -> None:
    bot.model.script = remembers_then_deletes
    root = await bot.start_run("say hello")
    [first] = await answers(bot, root, 1)
    assert first.text == "turn 1"
    roots = len(bot.slack.roots())

    status, _ = await bot.sender.event(reply(root, "now delete u-100", user="UBOB"))
    assert status == 200
    [card] = await bot.cards(root, 1)
    assert card.thread_ts == root.ts, "the reply's run asks in the same thread"
    assert said_before(bot.model.requests[-1]) == [
        ("user", "say hello"),
        ("assistant", "turn 1"),
        ("user", "now delete u-100"),
    ]
    # Bob asked this time: the self-approval rules apply to him, not to alice.
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.sender.click(card, "approve", user="UALICE")
    later = await answers(bot, root, 2)
    assert later[-1].text == "done: deleted u-100"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    assert len(bot.slack.roots()) == roots, "no new thread"
    assert "<@UALICE> approved" in card.all_text()

    await bot.audit_until("approved")
    starts = [
        (entry[b"run_id"].decode(), json.loads(entry[b"details"]))
        for entry in await bot.audit_entries()
        if entry[b"event"] == b"started"
    ]
    [(first_run, first_details), (second_run, second_details)] = starts
    assert second_run != first_run, "a run of its own"
    assert second_details["continues"] == first_run
    assert second_details["requester"] == "UBOB"
    assert second_details["agent"] == "ops"
    assert "continues" not in first_details


async def test_a_reply_while_the_run_waits_is_answered_and_starts_nothing(bot: Harness) -> None:
    bot.model.script = remembers_then_deletes
    root = await bot.start_run("delete u-100")
    await bot.cards(root, 1)
    asked = len(bot.model.requests)

    await bot.sender.event(reply(root, "are you there?", user="UBOB"))
    told = await bot.slack.wait_for(
        lambda: [
            m for m in bot.slack.thread(root.channel, root.ts) if m.text == words.STILL_WAITING
        ],
        what="waiting for approval, not 'still working'",
    )
    assert len(told) == 1
    trail = await bot.audit_until("requested")
    assert [entry["event"] for entry in trail].count("started") == 1
    assert len(bot.model.requests) == asked


async def test_a_flood_of_replies_while_the_run_waits_gets_one_notice(bot: Harness) -> None:
    bot.model.script = remembers_then_deletes
    root = await bot.start_run("delete u-100")
    await bot.cards(root, 1)
    for n in range(10):
        status, _ = await bot.sender.event(reply(root, f"are you there? {n}", user="UBOB"))
        assert status == 200
    # A mention in the thread, which Slack sends twice (`app_mention`, then `message`).
    mention = reply(root, "<@UBOT0001> still there?", user="UCAROL")
    await bot.sender.event({**mention, "type": "app_mention"})
    await bot.sender.event(mention)
    # Each request is answered after what it said is posted: nothing more is coming.
    notices = (words.STILL_WORKING, words.STILL_WAITING)
    told = [m.text for m in bot.slack.thread(root.channel, root.ts) if m.text in notices]
    assert told == [words.STILL_WAITING], "one notice per run and minute, not one per reply"
    trail = await bot.audit_until("requested")
    assert [entry["event"] for entry in trail].count("started") == 1


@with_env(CONVERSATION_TTL_SECONDS="60")
async def test_a_reply_after_a_card_that_waited_longer_than_the_ttl_continues_the_thread(
    bot: Harness,
) -> None:
    """The thread's time to live counts from its last turn, not from the run's start."""
    bot.model.script = remembers_then_deletes
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    thread = bot.keys.thread(f"{root.channel}:{root.ts}")
    # The card waits past the minute: what Redis does to the thread's keys by then, at once.
    assert await bot.redis.pexpire(thread, 1)
    for _ in range(100):
        if not await bot.redis.exists(thread):
            break
        await asyncio.sleep(0.01)
    assert not await bot.redis.exists(thread)

    await bot.sender.click(card, "approve", user="UBOB")
    [answer] = await answers(bot, root, 1)
    assert answer.text == "done: deleted u-100"
    assert 0 < await bot.redis.ttl(thread) <= 60, "remembered again with the turn"

    status, _ = await bot.sender.event(reply(root, "hello again", user="UCAROL"))
    assert status == 200
    [_, again] = await answers(bot, root, 2)
    assert again.text == "turn 3", "a new run, with the earlier turn as its history"


async def test_a_bots_message_and_an_edit_in_the_thread_start_nothing(bot: Harness) -> None:
    root = await bot.start_run("say hello")
    await answers(bot, root, 1)
    await bot.sender.event({**reply(root, "beep", user="UBOT"), "bot_id": "B1"})
    await bot.sender.event({**reply(root, "edited", user="UBOB"), "subtype": "message_changed"})
    await bot.sender.event(reply(root, "a real one", user="UBOB"))
    await answers(bot, root, 2)
    trail = await bot.audit_until("started")
    assert [entry["event"] for entry in trail].count("started") == 2


async def test_an_app_mention_in_a_channel_starts_a_run(bot: Harness) -> None:
    bot.model.script = lambda request: [message("hi there")]
    event = {
        "type": "app_mention",
        "channel": "CGENERAL",
        "user": "UCAROL",
        "text": "<@UAPP> ops: say hi",
        "ts": f"{time.time():.6f}",
    }
    status, _ = await bot.sender.event(event)
    assert status == 200
    root = await bot.slack.wait_for(lambda: bot.slack.roots() and bot.slack.roots()[-1])
    assert "<@UCAROL> asked *ops*: say hi" in root.text
    [answer] = await answers(bot, root, 1)
    assert answer.text == "hi there"
    # Slack's `message` event for the same mention, had it been in the thread, is one run:
    again = {
        **event,
        "type": "message",
        "ts": f"{time.time():.6f}",
        "thread_ts": root.ts,
        "text": "<@UAPP> more",
    }
    await bot.sender.event({**again, "type": "app_mention"})
    await bot.sender.event(again)
    await answers(bot, root, 2)
    trail = await bot.audit_until("started")
    assert [entry["event"] for entry in trail].count("started") == 2


class PreviousStartJob(BaseModel):
    """The release before `continues`: it refuses fields it does not know."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    run_id: str
    agent: str
    task: str
    conversation: Conversation
    requested_at: float


def test_a_start_job_that_continues_nothing_reads_as_the_previous_release_wrote_it() -> None:
    conversation = Conversation(channel="C1", requester="U1")
    job = StartJob(
        run_id=new_run_id(), agent="ops", task="hi", conversation=conversation, requested_at=1.0
    )
    assert "continues" not in json.loads(job.payload())
    PreviousStartJob.model_validate_json(job.payload())  # an older worker runs it
    continuing = job.model_copy(update={"continues": new_run_id()})
    assert JOB.validate_json(continuing.payload()) == continuing
    with pytest.raises(ValidationError):  # an older worker drops it, with one log line
        PreviousStartJob.model_validate_json(continuing.payload())
