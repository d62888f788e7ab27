"""Every run is a Slack agent session: `processing` while it works, `suspended` while a call
waits, `closed` at the end, titled with its task; Slack's Stop is our Stop; a workspace without
sessions gets today's status message and Stop button, and one line in the log."""

from __future__ import annotations

import logging
import re
import time

import pytest

from tests.conftest import with_env
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.fake_slack import AGENT_ERRORS, ONE_CALL_ERRORS, FakeSlack, Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.test_faults import killed_inside_the_tool, lost_card, migrate_then_answer

SESSION_METHODS = ("agents.sessions.setStatus", "agents.sessions.rename")


def statuses(bot: Harness | FakeSlack, root: Message) -> list[str]:
    slack = bot if isinstance(bot, FakeSlack) else bot.slack
    session = slack.agents.session(root.channel, root.ts)
    return list(session.statuses) if session is not None else []


async def waiting_run(bot: Harness) -> tuple[Message, Message]:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.slack.wait_for(
        lambda: statuses(bot, root)[-1:] == ["suspended"], what="the session suspended"
    )
    return root, card


def stopped_by_slack(root: Message, user: str) -> dict[str, object]:
    return {
        "type": "agent_session_stopped",
        "channel": root.channel,
        "thread_ts": root.ts,
        "user": user,
        "event_ts": "1700000000.000500",
    }


@with_env(STREAMING="on")
async def test_a_run_is_a_session_from_its_start_to_its_end(bot: Harness) -> None:
    root, card = await waiting_run(bot)
    session = bot.slack.agents.session(root.channel, root.ts)
    assert session is not None
    assert (session.title, session.initiator) == ("delete u-100", "UALICE")
    assert statuses(bot, root) == ["processing", "suspended"]

    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    await bot.slack.wait_for(lambda: statuses(bot, root)[-1:] == ["closed"], what="closed")
    assert statuses(bot, root) == ["processing", "suspended", "processing", "closed"]
    bot.slack.assert_nothing_refused()


@with_env(STREAMING="on")
async def test_slacks_stop_stops_the_run_as_our_stop_does(bot: Harness) -> None:
    root, card = await waiting_run(bot)
    status, _ = await bot.sender.event(stopped_by_slack(root, "UALICE"))
    assert status == 200

    await bot.slack.wait_for(lambda: card.action_ids() == [], what="the card without buttons")
    assert ":no_entry: Stopped by <@UALICE>" in card.all_text()
    trail = await bot.audit_until("stopped")
    assert [e["user_id"] for e in trail if e["event"] == "stopped"] == ["UALICE"]
    await bot.slack.wait_for(lambda: statuses(bot, root)[-1:] == ["closed"], what="closed")
    assert agents.EXECUTIONS == []


@with_env(APPROVERS="UBOB", STREAMING="on")
async def test_slacks_stop_pressed_by_someone_who_may_not_is_told_privately(
    bot: Harness,
) -> None:
    root, card = await waiting_run(bot)
    await bot.sender.event(stopped_by_slack(root, "UEVE"))
    note = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == "UEVE"], what="a note to Eve"
    )
    assert "may stop this run" in note[0]["text"]
    await bot.slack.wait_for(
        lambda: statuses(bot, root) == ["processing", "suspended", "suspended"],
        what="the session's status sent again",
    )
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100", "the run goes on"


@with_env(STREAMING="on")
async def test_slacks_stop_on_a_thread_that_is_no_run_changes_nothing(bot: Harness) -> None:
    root, card = await waiting_run(bot)
    stray = stopped_by_slack(root, "UALICE") | {"thread_ts": "1700000000.000001"}
    assert (await bot.sender.event(stray))[0] == 200
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


@with_env(STREAMING="on")
@pytest.mark.parametrize("error", AGENT_ERRORS)
async def test_without_sessions_a_run_shows_todays_status_and_one_log_line(
    bot: Harness, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    bot.slack.refuse(SESSION_METHODS, error)
    caplog.set_level(logging.WARNING, logger="bot.reporting.sessions")
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    thread = bot.slack.thread
    [status] = await bot.slack.wait_for(
        lambda: [m for m in thread(root.channel, root.ts) if "stop_run" in m.action_ids()],
        what="the status message with our Stop",
    )
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    await bot.slack.wait_for(
        lambda: status.text.startswith(":white_check_mark: Done"), what="the status: done"
    )
    said = [r.getMessage() for r in caplog.records]
    if error in ONE_CALL_ERRORS:  # the app could: this run falls back, the next tries again
        lines = [line for line in said if "streaming off for this run" in line]
        [run_id] = set(re.findall(r"\br[0-9a-f]{16}\b", status.all_text()))
        assert len(lines) == 1 and f"run {run_id}:" in lines[0], lines
        assert not [line for line in said if "for this process" in line]
    else:
        lines = [line for line in said if "streaming off for this process" in line]
        assert len(lines) == 1, lines
    assert error in lines[0]
    if error == "missing_scope":
        assert "assistant:write" in lines[0]
    elif error not in ONE_CALL_ERRORS:
        assert "STREAMING=off" in lines[0]


@with_env(STREAMING="off")
async def test_streaming_off_leaves_sessions_alone(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert not [c for c in bot.slack.calls if c.method.startswith("agents.")]


async def test_a_worker_killed_mid_stretch_leaves_no_session_processing(
    deployment: Deployment,
) -> None:
    """The worker running an approved tool is SIGKILLed: the other one takes the run over, asks
    again (the session waits), and once approved and answered the session is closed."""
    deployment.model.script = migrate_then_answer
    root, _ = await killed_inside_the_tool(deployment, "migrate users", STREAMING="on")
    again = await lost_card(deployment, root)
    slack = deployment.slack
    await slack.wait_for(
        lambda: statuses(slack, root)[-1:] == ["suspended"], what="suspended again"
    )
    await deployment.sender.click(again, "approve", user="UBOB")
    await deployment.final_answers(root)
    await slack.wait_for(lambda: statuses(slack, root)[-1:] == ["closed"], 20, "closed")
    assert statuses(slack, root)[-3:] == ["suspended", "processing", "closed"]


@with_env(STREAMING="on")
async def test_an_approved_tool_does_not_wait_for_the_sessions_status(bot: Harness) -> None:
    """Slack slow to set a session's status (5 s an answer) holds up no approved tool: the
    resumed stretch says `processing` beside its work, not before it."""
    root, card = await waiting_run(bot)
    bot.slack.slow_down("agents.sessions.setStatus", 5.0)
    clicked = time.monotonic()
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.slack.wait_for(lambda: agents.EXECUTIONS, 4.0, "the approved tool ran")
    assert time.monotonic() - clicked < 2.0
    bot.slack.speed_up("agents.sessions.setStatus")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    await bot.slack.wait_for(lambda: statuses(bot, root)[-1:] == ["closed"], what="closed")
    assert statuses(bot, root) == ["processing", "suspended", "processing", "closed"]
