"""Requests as Slack sends them to `/slack/events`: the same forms, payloads and signature.

The console builds its requests here, signs them server-side with the app's signing secret
(the browser never sees it), and the tests play Slack with the same functions.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

from bot.console.local_directory import TEAM
from bot.console.local_slack import Message

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
_triggers = itertools.count(1)


def signature_headers(
    secret: str, body: str, timestamp: int | None = None, content_type: str = FORM
) -> dict[str, str]:
    """Slack's v0 scheme: HMAC-SHA256 over `v0:{timestamp}:{body}` with the signing secret."""
    stamp = int(time.time()) if timestamp is None else timestamp
    base = f"v0:{stamp}:{body}".encode()
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(stamp),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": content_type,
    }


def new_trigger() -> str:
    return f"{next(_triggers)}.{time.time_ns()}.triggerhash"


def slack_user(user_id: str, name: str | None = None, team: str = TEAM) -> dict[str, str]:
    """The `user` of an interaction payload; `team` is the person's own (another organisation's
    for a Slack Connect user, as in bolt-python's `connect_channel_payload`)."""
    name = name or user_id.lower()
    return {"id": user_id, "username": name, "name": name, "team_id": team}


def _team(user: dict[str, str]) -> dict[str, str]:
    """The payload's `team`: the clicker's own, as Slack sends it in a shared channel."""
    team = user.get("team_id", TEAM)
    return {"id": team, "domain": "console" if team == TEAM else team.lower()}


def slash_command_form(
    *,
    text: str,
    user: str,
    channel: str,
    response_url: str,
    trigger_id: str,
    command: str = "/agent",
    user_name: str | None = None,
    channel_name: str = "general",
) -> str:
    return urlencode(
        {
            "token": "unused",
            "team_id": TEAM,
            "team_domain": "console",
            "channel_id": channel,
            "channel_name": channel_name,
            "user_id": user,
            "user_name": user_name or user.lower(),
            "command": command,
            "text": text,
            "api_app_id": "A0001",
            "response_url": response_url,
            "trigger_id": trigger_id,
        }
    )


def interaction_form(payload: dict[str, Any]) -> str:
    """Clicks and submissions arrive as one form field, `payload`, holding JSON."""
    return urlencode({"payload": json.dumps(payload)})


def element_action(
    element: dict[str, Any], block_id: str, selected_value: str | None = None
) -> dict[str, Any]:
    """One entry of `actions` as Slack sends it for `element`: a button's value, or the option
    chosen from a static select or an overflow menu (which must be one of its options)."""
    action: dict[str, Any] = {
        "type": element.get("type", "button"),
        "action_id": element["action_id"],
        "block_id": block_id,
        "action_ts": f"{time.time():.6f}",
    }
    if action["type"] == "button":
        action["text"] = element.get("text", {"type": "plain_text", "text": element["action_id"]})
        action["value"] = str(element.get("value", ""))
        return action
    options = [o for group in element.get("option_groups", []) for o in group.get("options", [])]
    options += element.get("options", [])
    chosen = next((o for o in options if o.get("value") == selected_value), None)
    if chosen is None:
        raise ValueError(f"{selected_value!r} is not an option of {element['action_id']}")
    action["selected_option"] = {"text": chosen["text"], "value": chosen["value"]}
    if "placeholder" in element:
        action["placeholder"] = element["placeholder"]
    return action


def button_click(
    *,
    message: Message,
    action_id: str,
    value: str,
    user: dict[str, str],
    response_url: str,
    trigger_id: str,
    block_id: str = "approval",
    action: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `block_actions` payload for a click on a button (or a menu: `action`) of `message`."""
    return _block_actions(
        user,
        trigger_id,
        action or _button(action_id, block_id, value),
        container={
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
            "thread_ts": message.thread_ts,
        },
        channel={"id": message.channel, "name": "general"},
        message={"ts": message.ts, "text": message.text, "blocks": message.blocks},
        response_url=response_url,
    )


def ephemeral_click(
    *,
    channel: str,
    message_ts: str,
    action: dict[str, Any],
    user: dict[str, str],
    response_url: str,
    trigger_id: str,
) -> dict[str, Any]:
    """A `block_actions` payload for a click on a message only its reader sees: Slack sends
    no `message` with it, and says the container is ephemeral."""
    return _block_actions(
        user,
        trigger_id,
        action,
        container={
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": True,
        },
        channel={"id": channel, "name": "general"},
        response_url=response_url,
    )


def home_click(
    *,
    view_id: str,
    action_id: str,
    value: str,
    user: dict[str, str],
    trigger_id: str,
    block_id: str = "home",
    action: dict[str, Any] | None = None,
    view: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `block_actions` payload for a click on a button of a person's Home tab; `view`, the tab
    as published, comes with it as Slack sends it (blocks, state, hash)."""
    shown: dict[str, Any] = {
        "id": view_id,
        "type": "home",
        "team_id": TEAM,
        "app_installed_team_id": TEAM,
    }
    if view is not None:
        shown = {
            "callback_id": "",
            "private_metadata": "",
            **view,
            **shown,
            "state": {"values": {}},
            "hash": f"{time.time():.6f}.home",
            "app_id": "A0001",
            "bot_id": "B0001",
        }
    return _block_actions(
        user,
        trigger_id,
        action or _button(action_id, block_id, value),
        container={"type": "view", "view_id": view_id},
        view=shown,
    )


def _block_actions(
    user: dict[str, str], trigger_id: str, action: dict[str, Any], **where: Any
) -> dict[str, Any]:
    """What every `block_actions` payload carries, in Slack's order, then where the click was
    (`container`, and `channel`, `message`, `view`, `response_url` as the surface has them)."""
    container = where.pop("container")
    return {
        "type": "block_actions",
        # The team whose app posted what was clicked, not the clicker's (a Slack Connect user
        # clicking a card here: `user.team_id` is theirs, `team` ours; slackapi/java-slack-sdk
        # issue 1041).
        "team": {"id": TEAM, "domain": "console"},
        "user": user,
        "api_app_id": "A0001",
        "token": "unused",
        "container": container,
        "trigger_id": trigger_id,
        **where,
        "actions": [action],
    }


def home_opened(user: str, view: dict[str, Any] | None = None, *, tab: str = "home") -> str:
    """The Events API callback Slack sends when `user` opens the app's Home tab, or (`tab`
    `messages`) its Messages tab (JSON-bodied; sign it with `signature_headers(...,
    content_type=JSON)`). `view` is the Home tab as last published, which Slack includes once
    there is one."""
    event: dict[str, Any] = {
        "type": "app_home_opened",
        "user": user,
        "channel": f"D{user}",
        "tab": tab,
        "event_ts": f"{time.time():.6f}",
    }
    if view is not None:
        event["view"] = view
    return _event_callback(event)


def message_event(channel: str, user: str, text: str, ts: str, thread_ts: str | None) -> str:
    """The Events API callback Slack sends for a person's message: a reply in a channel's
    thread (`message.channels`), or one to the app in its Messages tab (`message.im`, a
    thread's first without `thread_ts`); JSON-bodied like `home_opened`."""
    event = {
        "type": "message",
        "channel": channel,
        "channel_type": "im" if channel.startswith("D") else "channel",
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        **({"thread_ts": thread_ts} if thread_ts else {}),
    }
    return _event_callback(event)


def session_stopped(channel: str, thread_ts: str, user: str) -> str:
    """The Events API callback Slack sends when a person presses its own Stop on an agent
    session (`agent_session_stopped`)."""
    event = {
        "type": "agent_session_stopped",
        "channel": channel,
        "thread_ts": thread_ts,
        "user": user,
        "event_ts": f"{time.time():.6f}",
    }
    return _event_callback(event)


def _event_callback(event: dict[str, Any]) -> str:
    """The Events API's envelope around `event`, as Slack posts it (JSON-bodied)."""
    return json.dumps(
        {
            "token": "unused",
            "team_id": TEAM,
            "api_app_id": "A0001",
            "type": "event_callback",
            "event_id": f"Ev{time.time_ns()}",
            "event_time": int(time.time()),
            "event": event,
        }
    )


def _button(action_id: str, block_id: str, value: str) -> dict[str, Any]:
    return element_action({"type": "button", "action_id": action_id, "value": value}, block_id)


def view_submission(
    *, view: dict[str, Any], user: dict[str, str], values: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """A `view_submission` payload: the modal as opened, with what the person typed."""
    return {
        "type": "view_submission",
        "team": _team(user),
        "user": user,
        "api_app_id": "A0001",
        "token": "unused",
        "trigger_id": new_trigger(),
        "view": {
            "id": view.get("id", "V0001"),
            "team_id": _team(user)["id"],
            "type": "modal",
            "callback_id": view.get("callback_id", ""),
            "private_metadata": view.get("private_metadata", ""),
            "blocks": view.get("blocks", []),
            "state": {"values": values},
            "hash": "h",
            "title": view.get("title"),
            "app_installed_team_id": TEAM,
        },
    }
