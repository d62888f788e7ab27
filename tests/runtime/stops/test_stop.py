"""Stopping a run: the Stop button, `/agent stop|cancel <run id>`, who may, and races."""

from __future__ import annotations

import asyncio
import time

import pytest

from runtime.stops.listener import FALLBACK_SECONDS
from tests.conftest import with_env
from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


def status_message(bot: Harness, root: Message) -> Message:
    [status] = [m for m in bot.slack.thread(root.channel, root.ts) if "stop_run" in m.action_ids()]
    return status


async def waiting_run(bot: Harness) -> tuple[Message, Message, str]:
    """A run waiting on one card: its root, the card, and the card's `run_id:approval_id`."""
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    value = str(card.actions()[0]["value"])
    await bot.slack.wait_for(
        lambda: not status_message_gone(bot, root), what="a Stop button on the status message"
    )
    return root, card, value


async def stopped_note(bot: Harness, root: Message) -> Message:
    notes = await bot.slack.wait_for(
        lambda: [m for m in bot.slack.notes(root.ts) if m.text.startswith(":no_entry: Stopped")],
        what="the thread saying who stopped the run",
    )
    return notes[0]  # type: ignore[no-any-return]


async def test_the_requester_stops_a_waiting_run_and_old_buttons_change_nothing(
    bot: Harness,
) -> None:
    root, card, ref = await waiting_run(bot)
    requests_before = len(bot.model.requests)
    await bot.sender.click(status_message(bot, root), "stop_run", user="UALICE")

    note = await stopped_note(bot, root)
    assert "<@UALICE>" in note.text
    await bot.slack.wait_for(lambda: card.action_ids() == [], what="the card without buttons")
    assert ":no_entry: Stopped by <@UALICE>" in card.all_text()
    assert status_message_gone(bot, root), "the Stop button goes once stopped"

    # Bob's screen still shows the buttons.
    await bot.sender.click(card, "approve", user="UBOB", value=ref)
    note_to_bob = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == "UBOB"], what="note to Bob"
    )
    assert "already stopped" in note_to_bob[0]["text"]
    trail = await bot.audit_until("stopped")
    assert [e["user_id"] for e in trail if e["event"] == "stopped"] == ["UALICE"]
    assert agents.EXECUTIONS == []
    assert len(bot.model.requests) == requests_before, "the model is not called again"
    assert not await bot.redis.zcard(bot.keys.deadlines), "its deadline went"


def status_message_gone(bot: Harness, root: Message) -> bool:
    return not [m for m in bot.slack.thread(root.channel, root.ts) if "stop_run" in m.action_ids()]


@with_env(APPROVERS="UBOB")
async def test_someone_who_may_not_stop_is_told_who_may(bot: Harness) -> None:
    root, card, ref = await waiting_run(bot)
    status, body = await bot.sender.command(f"stop {ref.split(':')[0]}", user="UEVE")
    assert status == 200
    assert body["text"].startswith("Only ") and "may stop this run" in body["text"]
    assert "<@UALICE>" in body["text"] or "UALICE" in body["text"]
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100", "the run goes on"


@with_env(APPROVERS="UBOB", ADMINS="UADMIN")
@pytest.mark.parametrize("word", ["stop", "cancel"])
async def test_an_admin_stops_a_run_with_the_command(bot: Harness, word: str) -> None:
    root, _card, ref = await waiting_run(bot)
    status, body = await bot.sender.command(f"{word} {ref.split(':')[0]}", user="UADMIN")
    assert status == 200 and body["text"].startswith("Stopped"), body
    assert "<@UADMIN>" in (await stopped_note(bot, root)).text
    assert agents.EXECUTIONS == []


async def test_stop_without_a_run_id_says_how(bot: Harness) -> None:
    status, body = await bot.sender.command("stop")
    assert status == 200 and "stop <run id>" in body["text"]
    assert bot.slack.roots() == [], "not taken for a task"


def migrate_then_delete(request: ModelRequest) -> list[dict[str, object]]:
    """Migrate (slow, needs approval); after it, ask to delete u-100 (would need a card)."""
    outputs = request.tool_outputs
    if "call_migrate" not in outputs:
        return [tool_call("migrate", {"table": "users"}, "call_migrate")]
    if "call_del" not in outputs:
        return [tool_call("delete_user", {"user_id": "u-100"}, "call_del")]
    return [message("done")]


async def test_a_stop_during_a_slow_tool_lets_it_finish_and_nothing_follows(
    bot: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOW_TOOL_SECONDS", "1.5")
    bot.model.script = migrate_then_delete
    root = await bot.start_run("migrate users")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    for _ in range(200):  # not a Slack event: poll
        if agents.EXECUTIONS:
            break
        await asyncio.sleep(0.01)
    assert agents.EXECUTIONS, "the slow tool started"

    status_msg = status_message(bot, root)
    status, _ = await bot.sender.click(status_msg, "stop_run", user="UALICE")
    assert status == 200
    await stopped_note(bot, root)
    await bot.audit_until("executed")  # the tool finished and its outcome was recorded
    assert [tool for tool, _ in agents.EXECUTIONS] == ["migrate"]
    assert len(bot.slack.cards()) == 1, [
        (m.text, m.action_ids()) for m in bot.slack.thread(root.channel, root.ts)
    ]
    assert not bot.slack.final_answers(root.ts)
    ending = await bot.slack.wait_for(
        lambda: status_message_gone(bot, root), what="the status message without Stop"
    )
    assert ending


async def test_a_stop_cancels_the_model_call_in_flight_at_once(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root, card, _ = await waiting_run(bot)
    bot.model.delay = 30.0  # the model's answer to the resumed run would take half a minute
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.slack.wait_for(lambda: len(bot.model.requests) == 2, what="the model call resumed")
    stopped_at = time.monotonic()
    await bot.sender.click(status_message(bot, root), "stop_run", user="UALICE")
    await stopped_note(bot, root)
    # Heard on the stops stream, not found by the slower fallback poll (FALLBACK_SECONDS).
    assert time.monotonic() - stopped_at < FALLBACK_SECONDS / 2
    assert not bot.slack.final_answers(root.ts)
    trail = await bot.audit_until("stopped")
    assert [e["event"] for e in trail].count("stopped") == 1


async def test_a_stop_racing_an_approval_has_one_outcome(bot: Harness) -> None:
    for _ in range(5):
        agents.EXECUTIONS.clear()
        root, card, ref = await waiting_run(bot)
        status_msg = status_message(bot, root)
        await asyncio.gather(
            bot.sender.click(card, "approve", user="UBOB"),
            bot.sender.click(status_msg, "stop_run", user="UALICE"),
        )

        def endings(root: Message = root) -> list[Message]:
            notes = [n for n in bot.slack.notes(root.ts) if ":no_entry: Stopped by" in n.text]
            return notes + bot.slack.final_answers(root.ts)

        await bot.slack.wait_for(endings, what="an ending")
        # Settled: the run has ended once its tombstone is laid.
        tombstone = bot.keys.tombstone(ref.split(":")[0])
        for _ in range(200):
            if await bot.redis.exists(tombstone):
                break
            await asyncio.sleep(0.05)
        assert await bot.redis.exists(tombstone), "the run ended"
        stopped = [n for n in bot.slack.notes(root.ts) if ":no_entry: Stopped by" in n.text]
        answers = bot.slack.final_answers(root.ts)
        assert len(stopped) + len(answers) == 1, "exactly one ending"
        assert len(agents.EXECUTIONS) <= 1
        card_text = card.all_text()
        assert ("> approved `" in card_text) != (":no_entry: Stopped" in card_text)
