"""The Slack app as the manifests create it: what they ask for is what the bot answers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
import yaml

from bot.slack.client import slack_client
from bot.slack.links import ThreadLinks
from tests.support.fake_slack import FakeSlack
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.slack_requests import signature_headers

ROOT = Path(__file__).resolve().parents[3]
SCOPES = {
    "commands",
    "chat:write",
    "chat:write.public",
    "im:write",
    "usergroups:read",
    "users:read",
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "channels:read",
    "groups:read",
    "im:read",
    "mpim:read",
    "assistant:write",
    "im:history",
}


def manifest(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / name).read_text())
    return loaded


def urls(node: object) -> list[str]:
    """Every URL in the manifest, wherever it sits."""
    if isinstance(node, dict):
        return [url for value in node.values() for url in urls(value)]
    if isinstance(node, list):
        return [url for value in node for url in urls(value)]
    return [node] if isinstance(node, str) and node.startswith("https://") else []


def test_the_http_manifest_points_everything_at_slack_events() -> None:
    app = manifest("slack-manifest.yml")
    assert set(app["oauth_config"]["scopes"]["bot"]) == SCOPES
    [command] = app["features"]["slash_commands"]
    assert command["command"] == "/agent"
    # People write to the app in its Messages tab, Slack's agent experience.
    assert "agent_view" in app["features"] and "assistant_view" not in app["features"]
    assert app["features"]["app_home"]["messages_tab_read_only_enabled"] is False
    assert "message.im" in app["settings"]["event_subscriptions"]["bot_events"]
    settings = app["settings"]
    assert settings["interactivity"]["is_enabled"] is True
    assert app["features"]["app_home"]["home_tab_enabled"] is True
    events = settings["event_subscriptions"]["bot_events"]
    assert {"app_home_opened", "app_mention", "message.channels", "message.groups"} <= set(events)
    assert {"member_joined_channel", "member_left_channel"} <= set(events)
    assert "agent_session_stopped" in events, "Slack's own Stop"
    assert settings["socket_mode_enabled"] is False
    found = urls(app)
    assert len(found) == 3, "command, interactivity and events"
    assert all(url.endswith("/slack/events") for url in found)


def test_the_socket_mode_manifest_is_the_same_app_without_urls() -> None:
    http, socket = manifest("slack-manifest.yml"), manifest("slack-manifest.socket-mode.yml")
    assert socket["settings"]["socket_mode_enabled"] is True
    assert urls(socket) == []
    assert socket["oauth_config"] == http["oauth_config"]
    assert socket["features"]["app_home"] == http["features"]["app_home"]
    assert (
        socket["settings"]["event_subscriptions"]["bot_events"]
        == (http["settings"]["event_subscriptions"]["bot_events"])
    )
    assert [c["command"] for c in socket["features"]["slash_commands"]] == ["/agent"]


async def test_slacks_url_verification_is_answered(bot: Harness) -> None:
    body = json.dumps({"type": "url_verification", "token": "t", "challenge": "c-123"})
    status, text = await bot.sender.post(
        body, {**_headers(bot, body), "Content-Type": "application/json"}
    )
    assert (status, json.loads(text)) == (200, {"challenge": "c-123"})


@pytest.mark.parametrize(
    "event", manifest("slack-manifest.yml")["settings"]["event_subscriptions"]["bot_events"]
)
async def test_subscribed_events_are_acknowledged(bot: Harness, event: str) -> None:
    body = json.dumps(
        {
            "type": "event_callback",
            "team_id": "T0001",
            "api_app_id": "A0001",
            # `message.channels` and `message.groups` arrive as `message` events.
            "event": {"type": event.split(".")[0]},
            "event_id": "Ev1",
            "event_time": 1,
        }
    )
    status, _ = await bot.sender.post(
        body, {**_headers(bot, body), "Content-Type": "application/json"}
    )
    assert status == 200


@pytest.mark.parametrize(
    "response_urls",
    [
        [
            {"response_url": "https://hooks.slack.com/a"},
            {"response_url": "https://hooks.slack.com/b"},
        ],
        ["https://hooks.slack.com/a"],
    ],
    ids=["two", "not-objects"],
)
async def test_a_modal_with_response_urls_it_never_asked_for_is_refused_not_a_500(
    bot: Harness, response_urls: list[Any]
) -> None:
    """Bolt reads `response_urls` while it builds its request: two of them (a modal with two
    conversation menus that set `response_url_enabled`) raised KeyError there, a string in
    place of an object AttributeError, both a 500 with a traceback (found by the fuzzer)."""
    view = {"type": "modal", "callback_id": "reject_reason", "private_metadata": "{}"}
    payload = {
        "type": "view_submission",
        "user": {"id": "UBOB"},
        "view": view,
        "response_urls": response_urls,
    }
    body = "payload=" + quote(json.dumps(payload))
    headers = {**_headers(bot, body), "Content-Type": "application/x-www-form-urlencoded"}
    status, text = await bot.sender.post(body, headers)
    assert (status, json.loads(text)) == (400, {"ok": False, "error": "malformed_payload"})


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
async def test_slacks_ssl_check_is_answered_200_and_does_nothing(
    bot: Harness, signed: bool
) -> None:
    body = "ssl_check=1&token=t-legacy"
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    status, text = await bot.sender.post(
        body, {**_headers(bot, body), **headers} if signed else headers
    )
    assert (status, text) == (200, "")
    assert bot.slack.calls_to("chat.postMessage") == []


async def test_lists_ask_slack_for_the_workspace_url_once_per_process(bot: Harness) -> None:
    """The web process learns it checking its token at start (as the worker checks its own);
    twenty lists at once ask nothing."""
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    await bot.cards(root, 1)
    await bot.slack.wait_for(
        lambda: len(bot.slack.calls_to("auth.test")) == 2, what="each process's check at start"
    )
    answers = await asyncio.gather(
        *(bot.sender.command("status", user=f"U{n:04d}") for n in range(20))
    )
    link = f"https://console.localhost/archives/CGENERAL/p{root.ts.replace('.', '')}"
    assert all(status == 200 and link in body["text"] for status, body in answers)
    assert len(bot.slack.calls_to("auth.test")) == 2


async def test_concurrent_links_wait_for_one_answer_when_the_url_is_not_known_yet() -> None:
    slack = FakeSlack()
    await slack.start()
    try:
        async with aiohttp.ClientSession() as session:
            links = ThreadLinks(
                slack_client(token="xoxb-t", base_url=slack.api_url, session=session)
            )
            slack.slow_down("auth.test", 0.3)  # so that every caller arrives before the answer
            found = await asyncio.gather(*(links.thread("C1", f"1.{n}") for n in range(30)))
        assert found == [f"https://console.localhost/archives/C1/p1{n}" for n in range(30)]
        assert len(slack.calls_to("auth.test")) == 1
    finally:
        await slack.stop()


def _headers(bot: Harness, body: str) -> dict[str, str]:
    return signature_headers(bot.sender.secret, body)
