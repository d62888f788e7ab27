"""Each stretch of a run streams one message in its thread: a task per tool call, stopped when
the run waits or ends (the status message's blocks at its foot); a stream Slack ended goes on
as an ordinary message; a workspace without streams gets today's status message."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.reporting.reporter import SlackReporter
from bot.reporting.streams import STREAM_PREFIX
from bot.wiring import slack_parts
from runtime.jobs.contracts import Conversation
from runtime.reporter import Activity, RunView, Task
from tests.conftest import with_env
from tests.support.fake_openai import message
from tests.support.fake_slack import AGENT_ERRORS, ONE_CALL_ERRORS, Message
from tests.support.harness import BOT_TOKEN, Harness
from tests.support.model_scripts import delete_then_answer


def streamed(bot: Harness, root: Message) -> list[Message]:
    return [m for m in bot.slack.thread(root.channel, root.ts) if m.streamed]


def tasks(message: Message) -> list[tuple[str, str, Any]]:
    return [(t["title"], t["status"], t.get("output") or t.get("details")) for t in message.tasks]


@with_env(STREAMING="on")
async def test_each_stretch_streams_one_message_of_tasks(bot: Harness) -> None:
    bot.slack.users["UBOB"] = "bob"
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    [first] = await bot.slack.wait_for(lambda: streamed(bot, root), what="a streamed message")
    await bot.slack.wait_for(lambda: not first.streaming, what="stopped as the run waits")
    assert tasks(first) == [
        ("Waiting for approval: delete_user, anyone in the channel can decide", "pending", None)
    ]
    [waiting_link] = first.tasks[0]["sources"]
    assert (waiting_link["url"], waiting_link["text"]) == (card_link(card, root), "Its card"), (
        "the waiting task links to its card: the stream stopped once the card was posted"
    )
    assert float(first.ts) < float(card.ts), "the status message still comes before the card"
    assert "stop_run" in first.action_ids(), "the status message's blocks at its foot"
    assert first.recipient == "UALICE"
    [start] = bot.slack.calls_to("chat.startStream")
    assert start.args["recipient_team_id"] == "T0001"

    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    second = (await bot.slack.wait_for(lambda: streamed(bot, root)[1:], what="a second stream"))[0]
    await bot.slack.wait_for(lambda: not second.streaming, what="the second stream stopped")
    assert tasks(second) == [("delete_user", "complete", "Approved by @bob")]
    [link] = second.tasks[0]["sources"]
    assert link["url"] == (
        f"https://console.localhost/archives/{card.channel}/p{card.ts.replace('.', '')}"
        f"?thread_ts={root.ts}&cid={root.channel}"
    ), "a link to the card that asked"
    assert first.text.startswith("• `delete_user`: Approved by @bob (<https://console.localhost/")
    assert first.text.endswith("|its card>)\nDecided; the run went on below.")
    assert second.text == "done: deleted u-100", "the model's text, streamed as it came"
    assert ":white_check_mark: Done" in second.all_text()
    assert first.action_ids() == [], "the waiting stretch's buttons went once decided"
    assert len(bot.slack.calls_to("chat.stopStream")) == 2, (
        "a stop a stretch: the worker that stopped the waiting stream settles it unasked"
    )
    await bot.audit_until("executed")  # every step is in the audit trail, as before
    bot.slack.assert_nothing_refused()


def card_link(card: Message, root: Message) -> str:
    """The permalink of a card in the run's thread, as a task's link has it."""
    return (
        f"https://console.localhost/archives/{card.channel}/p{card.ts.replace('.', '')}"
        f"?thread_ts={root.ts}&cid={root.channel}"
    )


@with_env(STREAMING="on")
async def test_a_stream_slack_ended_goes_on_as_an_ordinary_message(bot: Harness) -> None:
    bot.slack.agents.stream_seconds = 0.0  # every stream ends as soon as it starts
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    [first] = await bot.slack.wait_for(lambda: streamed(bot, root), what="a streamed message")
    await bot.slack.wait_for(
        lambda: "stop_run" in first.action_ids(), what="the status drawn on it by chat.update"
    )
    assert first.text.startswith(":raised_hand: Waiting for approval")
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    await bot.slack.wait_for(
        lambda: any(m.text.startswith(":white_check_mark: Done") for m in streamed(bot, root)),
        what="the ending drawn on the second stretch's message",
    )


@with_env(STREAMING="on")
@pytest.mark.parametrize("error", AGENT_ERRORS)
async def test_without_streams_a_run_shows_todays_status_and_one_log_line(
    bot: Harness, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An answer that says the app cannot stream turns streams off for the process; one about
    the call (a rate limit past the client's retries, Slack's own error) only for that run,
    and the next run streams again. Either way the thread shows every step."""
    bot.slack.refuse("chat.startStream", error)
    caplog.set_level(logging.INFO, logger="bot.reporting")
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    status = await status_with_stop(bot, root)
    assert not status.streamed
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    await bot.slack.wait_for(
        lambda: status.text.startswith(":white_check_mark: Done"), what="the status: done"
    )
    assert ":white_check_mark:" in status.all_text() and "delete_user" in status.all_text()
    tries = 6 if error == "ratelimited" else 1  # the client's 5 retries of a 429, then no more
    assert len(bot.slack.calls_to("chat.startStream")) == tries, "never tried again for the run"

    said = [r.getMessage() for r in caplog.records]
    one_run = error in ONE_CALL_ERRORS
    kind = "streaming off for this run" if one_run else "streaming off for this process"
    lines = [line for line in said if kind in line]
    assert len(lines) == 1 and error in lines[0] and "chat.startStream" in lines[0], lines
    if one_run:
        assert not [line for line in said if "for this process" in line]
    else:
        # The scope Slack names as needed (`chat:write` for streams), else the setting.
        assert ("add the chat:write scope" if error == "missing_scope" else "STREAMING") in lines[0]

    bot.slack.answer_again("chat.startStream")  # only a run's error is tried again
    bot.model.script = lambda request: [message("nothing to do")]
    later = await bot.start_run("say hello")
    assert (await bot.final_answer(later)).text == "nothing to do"
    streamed_later = [m for m in bot.slack.thread(later.channel, later.ts) if m.streamed]
    assert bool(streamed_later) == one_run
    assert len(bot.slack.calls_to("chat.startStream")) == tries + (1 if one_run else 0)


def two_processes(
    bot: Harness, session: aiohttp.ClientSession
) -> tuple[SlackReporter, SlackReporter]:
    """The reporters of two worker processes: a run's stretches in one, then the other."""
    first, second = (
        slack_parts(bot.settings, redis=bot.redis, session=session).reporter for _ in "12"
    )
    return first, second


async def status_with_stop(bot: Harness, root: Message) -> Message:
    thread = bot.slack.thread
    found: list[Message] = await bot.slack.wait_for(
        lambda: [m for m in thread(root.channel, root.ts) if "stop_run" in m.action_ids()],
        what="the status message with our Stop",
    )
    [status] = found
    return status


@with_env(STREAMING="on")
async def test_a_stream_left_open_by_a_killed_worker_is_stopped_by_the_next(
    bot: Harness,
) -> None:
    """Two reporters, as two worker processes have: the first starts a stream and is gone; the
    second, given the run's stored `stream:` id, stops it with a line and streams anew."""
    client = AsyncWebClient(token=BOT_TOKEN, base_url=bot.slack.api_url)
    posted = await client.chat_postMessage(channel="CDEMO", text="migrate users")
    root = bot.slack.messages[str(posted["ts"])]
    run = RunView(
        run_id="r-killed",
        agent="ops",
        task="migrate users",
        conversation=Conversation(channel=root.channel, requester="UALICE", thread=root.ts),
    )
    working = Activity(
        steps=("tool:migrate",),
        state="working",
        tasks=(Task(id="c1", tool="migrate", state="running"),),
        opens_stretch=True,
    )
    async with aiohttp.ClientSession() as session:
        first, second = two_processes(bot, session)
        await moved_on(bot, run, first, second, working)


async def moved_on(
    bot: Harness, run: RunView, first: SlackReporter, second: SlackReporter, working: Activity
) -> None:
    stored = await first.progress(run, None, working)
    assert stored.startswith(STREAM_PREFIX)
    taken = await second.progress(run, stored, working)
    assert taken.startswith(STREAM_PREFIX) and taken != stored
    old = bot.slack.messages[stored.removeprefix(STREAM_PREFIX)]
    assert not old.streaming and "moved on to another worker" in old.text
    done = await second.progress(run, taken, replace(working, state="done", opens_stretch=False))
    assert not bot.slack.messages[done].streaming


WAITING = Task(id="c1", tool="delete_user", state="waiting")


async def run_in(client: AsyncWebClient, channel: str, task: str, run_id: str) -> RunView:
    """A run of `ops` that alice asked for `task` in `channel`, its thread that message's."""
    posted = await client.chat_postMessage(channel=channel, text=task)
    conversation = Conversation(channel=channel, requester="UALICE", thread=str(posted["ts"]))
    return RunView(run_id=run_id, agent="ops", task=task, conversation=conversation)


async def waiting_in(bot: Harness, client: AsyncWebClient) -> tuple[RunView, Activity]:
    """A run in #demo, its thread, and the status it shows as it stops for `delete_user`."""
    bot.slack.users["UBOB"] = "bob"
    run = await run_in(client, "CDEMO", "delete u-100", "r-waits")
    waiting = Activity(
        steps=(),
        state="waiting",
        waiting_for=("delete_user",),
        approvals_asked=1,
        tasks=(WAITING,),
        opens_stretch=True,
        cards_follow=True,
    )
    return run, waiting


async def post_card(bot: Harness, client: AsyncWebClient, run: RunView) -> Message:
    thread = run.conversation.thread
    answer = await client.chat_postMessage(channel="CDEMO", thread_ts=thread, text="the card")
    return bot.slack.messages[str(answer["ts"])]


def resumed(card: Message) -> Activity:
    """The next stretch's first showing: the call approved by bob, its card known."""
    approved = replace(WAITING, state="done", note="approved:UBOB", card=card.ts)
    return Activity(steps=(), state="working", tasks=(approved,), opens_stretch=True)


@with_env(STREAMING="on")
async def test_a_later_delivery_settles_a_stream_stopped_with_its_cards(bot: Harness) -> None:
    """The waiting stretch's stream stays open until its card is posted, then stops with the
    task linking to it; the id recorded with the card still says `stream:`. The next stretch,
    in another process, finds it stopped (Slack says so) and settles it: how the call ended,
    with its card, and no line saying a worker was lost."""
    client = AsyncWebClient(token=BOT_TOKEN, base_url=bot.slack.api_url)
    run, waiting = await waiting_in(bot, client)
    async with aiohttp.ClientSession() as session:
        first, second = two_processes(bot, session)
        recorded = await first.progress(run, None, waiting)
        assert recorded.startswith(STREAM_PREFIX)
        status = bot.slack.messages[recorded.removeprefix(STREAM_PREFIX)]
        assert status.streaming, "left open for the card"
        card = await post_card(bot, client, run)
        carded = replace(waiting, tasks=(replace(WAITING, card=card.ts),), opens_stretch=False)
        carded = replace(carded, cards_follow=False)
        assert await first.cards_posted(run, recorded, carded) == status.ts
        assert not status.streaming and "stop_run" in status.action_ids()
        [link] = status.tasks[0]["sources"]
        root = bot.slack.messages[str(run.conversation.thread)]
        assert link["url"] == card_link(card, root)

        again = await second.progress(run, recorded, resumed(card))
    assert again.startswith(STREAM_PREFIX) and again != recorded, "the next stretch streams"
    [_, asked] = bot.slack.calls_to("chat.stopStream")
    assert asked.args["ts"] == status.ts, "the other process asked Slack whether it streams"
    assert status.text.startswith(f"• `delete_user`: Approved by @bob (<{card_link(card, root)}|")
    assert status.text.endswith("Decided; the run went on below.")
    assert "moved on" not in status.text and status.action_ids() == []
    bot.slack.assert_nothing_refused()


@with_env(STREAMING="on")
async def test_a_worker_killed_before_its_cards_stop_leaves_a_stream_the_next_stops(
    bot: Harness,
) -> None:
    """The worker posted the card and was killed before it stopped its stream: the next
    stretch's worker stops it, saying the run moved on and how the call ended, with its card."""
    client = AsyncWebClient(token=BOT_TOKEN, base_url=bot.slack.api_url)
    run, waiting = await waiting_in(bot, client)
    async with aiohttp.ClientSession() as session:
        first, second = two_processes(bot, session)
        recorded = await first.progress(run, None, waiting)
        card = await post_card(bot, client, run)  # ... and the worker is gone
        again = await second.progress(run, recorded, resumed(card))
    status = bot.slack.messages[recorded.removeprefix(STREAM_PREFIX)]
    assert again != recorded and not status.streaming
    assert "moved on to another worker" in status.text
    assert tasks(status) == [("delete_user", "complete", "Approved by @bob")]
    root = bot.slack.messages[str(run.conversation.thread)]
    assert status.tasks[0]["sources"][0]["url"] == card_link(card, root)


async def test_without_streams_the_status_is_drawn_once_before_the_cards(bot: Harness) -> None:
    """Streaming off: the waiting status is drawn as before, and the cards being posted send
    nothing more."""
    client = AsyncWebClient(token=BOT_TOKEN, base_url=bot.slack.api_url)
    run, waiting = await waiting_in(bot, client)
    async with aiohttp.ClientSession() as session:
        reporter = slack_parts(bot.settings, redis=bot.redis, session=session).reporter
        shown = await reporter.progress(run, None, waiting)
        before = len(bot.slack.calls)
        carded = replace(waiting, tasks=(replace(WAITING, card="1.2"),), cards_follow=False)
        assert await reporter.cards_posted(run, shown, carded) == shown
    assert bot.slack.calls[before:] == []
    status = bot.slack.messages[shown]
    assert not status.streamed and "stop_run" in status.action_ids()


@with_env(STREAMING="on")
async def test_a_stretch_appends_only_what_changed_and_stops_at_its_end(bot: Harness) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=bot.slack.api_url)
    run = await run_in(client, "DUALICE", "list users", "r-appends")
    listed = Task(id="c1", tool="list_users", state="running")
    async with aiohttp.ClientSession() as session:
        reporter = slack_parts(bot.settings, redis=bot.redis, session=session).reporter
        first = Activity(steps=("tool:list_users",), state="working", tasks=(listed,))
        stream = await reporter.progress(run, None, replace(first, opens_stretch=True))
        second = replace(first, tasks=(replace(listed, state="done"),))
        assert await reporter.progress(run, stream, second) == stream
        assert await reporter.progress(run, stream, second) == stream  # nothing new: no call
        ended = await reporter.progress(
            run, stream, replace(second, state="done", ran=("list_users",))
        )
    [append] = bot.slack.calls_to("chat.appendStream")
    assert [c["status"] for c in append.args["chunks"]] == ["complete"]
    [stop] = bot.slack.calls_to("chat.stopStream")
    assert "chunks" not in stop.args, "nothing changed since the append"
    message = bot.slack.messages[ended]
    assert (message.streaming, tasks(message)) == (False, [("list_users", "complete", None)])
    assert ":white_check_mark: Done" in message.all_text()


@with_env(STREAMING="on")
async def test_a_rejected_call_is_a_task_in_error_with_the_reason_and_its_card(
    bot: Harness,
) -> None:
    bot.slack.users["UBOB"] = "bob"
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    [first] = await bot.slack.wait_for(lambda: streamed(bot, root), what="a streamed message")
    await bot.slack.wait_for(lambda: not first.streaming, what="stopped as the run waits")
    status, _ = await bot.sender.reject(card, user="UBOB", reason="Ada is still on payroll")
    assert status == 200
    await bot.final_answer(root)
    second = (await bot.slack.wait_for(lambda: streamed(bot, root)[1:], what="a second stream"))[0]
    await bot.slack.wait_for(lambda: not second.streaming, what="the second stream stopped")
    assert tasks(second) == [("delete_user", "error", "Rejected by @bob: Ada is still on payroll")]
    assert [s["text"] for s in second.tasks[0]["sources"]] == ["Its card"]
    assert first.text.startswith("• `delete_user`: Rejected by @bob: Ada is still on payroll (<")
    bot.slack.assert_nothing_refused()
