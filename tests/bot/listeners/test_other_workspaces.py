"""Requests of another installation of the same app start nothing and decide nothing here: a
slash command, an event or an interaction whose `team_id`, `enterprise_id`, `authorizations` or
`view.app_installed_team_id` name another workspace or organisation than the one this process's
token is installed in is answered without effect, and logged once.

Through the real web app, with requests signed as Slack signs them, in the shapes Slack sends:
written here after the payloads of slackapi/bolt-python's tests
(`tests/scenario_tests_async/test_slash_command.py`, `test_events_shared_channels.py`,
`test_events_org_apps.py`, `tests/scenario_tests/test_view_submission.py`'s
`connect_channel_payload`, `tests/slack_bolt/request/test_internals.py`'s Slack Connect events)
and slackapi/python-slack-sdk's (`tests/slack_sdk/socket_mode/mock_socket_mode_server.py`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.console.slack_payloads import JSON, new_trigger, signature_headers, view_submission
from bot.words.members import OTHER_WORKSPACE
from runtime.jobs.contracts import start_job_id
from tests.support import agents
from tests.support.fake_openai import message
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer

OTHER_TEAM, OTHER_ORG = "T0OTHER", "E0OTHER"


def slash_command(team: str, enterprise: str | None = None, text: str = "delete u-100") -> str:
    """A slash command's form, as bolt-python's `slash_command_body`."""
    fields = {
        "token": "verification_token",
        "team_id": team,
        "team_domain": team.lower(),
        "channel_id": "CGENERAL",
        "channel_name": "general",
        "user_id": "UALICE",
        "user_name": "alice",
        "command": "/agent",
        "text": text,
        "api_app_id": "A0001",
        "response_url": "https://hooks.slack.com/commands/T/1/x",
        "trigger_id": new_trigger(),
    }
    if enterprise is not None:
        fields |= {"enterprise_id": enterprise, "enterprise_name": "Org"}
    return urlencode(fields)


def mention_event(
    authorization: dict[str, Any], *, team: str = "T0001", **outer: Any
) -> dict[str, Any]:
    """An `app_mention` callback as bolt-python's shared-channel `app_mention_body`: the
    top-level `team_id` is the channel's host, `authorizations` the installation it is for."""
    ts = f"{time.time():.6f}"
    return {
        "token": "verification_token",
        "team_id": team,
        "api_app_id": "A0001",
        "event": {
            "type": "app_mention",
            "text": "<@UBOT0001> ops: say hi",
            "user": "UALICE",
            "ts": ts,
            "team": team,
            "channel": "CGENERAL",
            "event_ts": ts,
        },
        "type": "event_callback",
        "event_id": f"Ev{time.time_ns()}",
        "event_time": int(time.time()),
        "authorizations": [
            {"user_id": "UBOT0001", "is_bot": True, "is_enterprise_install": False} | authorization
        ],
        **outer,
    }


async def post_json(bot: Harness, body: dict[str, Any]) -> int:
    text = json.dumps(body)
    status, _ = await bot.sender.post(
        text, signature_headers(bot.sender.secret, text, content_type=JSON)
    )
    return status


async def runs_queued(bot: Harness) -> int:
    markers = tuple(shard.job_marker(start_job_id("")) for shard in bot.keys.shards)
    return len([key for key in await bot.keys_left() if key.startswith(markers)])


def ignored(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "serves another installation" in r.getMessage()]


async def test_a_slash_command_of_another_workspace_starts_nothing(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(3):
        status, text = await bot.sender.post(slash_command(OTHER_TEAM))
        assert (status, json.loads(text)["text"]) == (200, OTHER_WORKSPACE)
    _, text = await bot.sender.post(slash_command("T0ELSE", OTHER_ORG))
    assert json.loads(text)["text"] == OTHER_WORKSPACE, "a workspace of another organisation"
    assert await runs_queued(bot) == 0
    assert bot.slack.calls_to("chat.postMessage") == []
    [first, other_org] = ignored(caplog)
    assert first.levelno == logging.WARNING
    assert first.getMessage().startswith("/agent for team T0OTHER (enterprise None) ignored")
    assert "enterprise E0OTHER" in other_org.getMessage()

    # This workspace's own command, the same form with its team, starts a run.
    bot.model.script = delete_then_answer
    status, text = await bot.sender.post(slash_command("T0001"))
    assert json.loads(text)["text"].startswith("Starting *ops*")
    await bot.slack.wait_for(lambda: bot.slack.roots(), what="the run's root")


async def test_an_event_for_another_installation_starts_nothing_but_a_shared_channels_does(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    bot.model.script = lambda request: [message("hi")]
    other = mention_event({"team_id": OTHER_TEAM, "enterprise_id": None}, team=OTHER_TEAM)
    assert await post_json(bot, other) == 200
    assert await runs_queued(bot) == 0 and bot.slack.calls_to("chat.postMessage") == []
    [line] = ignored(caplog)
    assert line.getMessage().startswith("event_callback app_mention for team T0OTHER")

    # In a channel another organisation hosts (Slack Connect), the top-level team is theirs and
    # `authorizations` names this installation: it is ours.
    shared = mention_event(
        {"team_id": "T0001", "enterprise_id": None},
        team=OTHER_TEAM,
        enterprise_id=OTHER_ORG,
        is_ext_shared_channel=True,
    )
    assert await post_json(bot, shared) == 200
    [root] = await bot.slack.wait_for(lambda: bot.slack.roots(), what="the run's root")
    assert "<@UALICE> asked *ops*: say hi" in root.text


async def test_a_click_or_a_submission_of_another_installation_decides_nothing(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)

    click = bot.sender.click_payload(card, "approve", user="UBOB")
    click["team"] = {"id": OTHER_TEAM, "domain": "other"}
    status, text = await bot.sender.interact(click)
    assert (status, text) == (200, "")

    # The reject modal, opened here, submitted as if from a modal of another installation.
    await bot.sender.click(card, "reject", user="UBOB")
    await bot.slack.wait_for(lambda: bot.slack.views, what="the reject modal")
    values = {"reason": {"reason_input": {"type": "plain_text_input", "value": "no"}}}
    payload = view_submission(view=bot.slack.views[-1], user=bot.sender.user("UBOB"), values=values)
    payload["view"]["app_installed_team_id"] = OTHER_TEAM
    status, _ = await bot.sender.interact(payload)
    assert status == 200

    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"], (
        "still open"
    )
    trail = [e[b"event"] for e in await bot.audit_entries()]
    assert b"approved" not in trail and b"rejected" not in trail
    assert [e for e in bot.slack.ephemerals if e["user"] == "UBOB"] == []
    assert agents.EXECUTIONS == []
    assert [r.getMessage().split(" for ")[0] for r in ignored(caplog)] == ["block_actions"]

    # The same click from this installation decides.
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


@pytest.fixture
async def grid_bot(redis_url: str, prefix: str) -> AsyncIterator[Harness]:
    """The bot installed in a workspace of the Enterprise Grid organisation E0GRID."""
    harness = Harness(redis_url=redis_url, prefix=prefix)
    harness.slack.enterprise = "E0GRID"
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


async def test_on_enterprise_grid_any_workspace_of_the_organisation_is_served(
    grid_bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Installed in an organisation, the app serves each of its workspaces (an org-wide
    install's events name only the enterprise: bolt-python's `test_events_org_apps.py`)."""
    bot = grid_bot
    bot.model.script = lambda request: [message("hi")]
    _, text = await bot.sender.post(slash_command("T0SISTER", "E0GRID", "ops: say hi"))
    assert json.loads(text)["text"].startswith("Starting *ops*")
    org_wide = mention_event({"team_id": None, "enterprise_id": "E0GRID"}, team="T0SISTER")
    assert await post_json(bot, org_wide) == 200
    roots: list[Message] = await bot.slack.wait_for(
        lambda: len(bot.slack.roots()) == 2 and bot.slack.roots(), what="two runs"
    )
    for root in roots:
        assert (await bot.final_answer(root)).text == "hi"
    _, text = await bot.sender.post(slash_command(OTHER_TEAM, OTHER_ORG))
    assert json.loads(text)["text"] == OTHER_WORKSPACE
    assert len(ignored(caplog)) == 1
