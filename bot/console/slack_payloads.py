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

from bot.console.local_slack import TEAM, Message

FORM = "application/x-www-form-urlencoded"
_triggers = itertools.count(1)


def signature_headers(secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's v0 scheme: HMAC-SHA256 over `v0:{timestamp}:{body}` with the signing secret."""
    stamp = int(time.time()) if timestamp is None else timestamp
    base = f"v0:{stamp}:{body}".encode()
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(stamp),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": FORM,
    }


def new_trigger() -> str:
    return f"{next(_triggers)}.{time.time_ns()}.triggerhash"


def slack_user(user_id: str, name: str | None = None) -> dict[str, str]:
    name = name or user_id.lower()
    return {"id": user_id, "username": name, "name": name, "team_id": TEAM}


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


def button_click(
    *,
    message: Message,
    action_id: str,
    value: str,
    user: dict[str, str],
    response_url: str,
    trigger_id: str,
    block_id: str = "approval",
) -> dict[str, Any]:
    """A `block_actions` payload for a click on a button of `message`."""
    return {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "console"},
        "user": user,
        "api_app_id": "A0001",
        "token": "unused",
        "container": {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
            "thread_ts": message.thread_ts,
        },
        "trigger_id": trigger_id,
        "channel": {"id": message.channel, "name": "general"},
        "message": {"ts": message.ts, "text": message.text, "blocks": message.blocks},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": action_id},
                "value": value,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def home_click(
    *, view_id: str, action_id: str, value: str, user: dict[str, str], trigger_id: str
) -> dict[str, Any]:
    """A `block_actions` payload for a click on a button of a person's Home tab."""
    return {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "console"},
        "user": user,
        "api_app_id": "A0001",
        "token": "unused",
        "container": {"type": "view", "view_id": view_id},
        "trigger_id": trigger_id,
        "view": {"id": view_id, "type": "home", "team_id": TEAM},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "home",
                "text": {"type": "plain_text", "text": action_id},
                "value": value,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def view_submission(
    *, view: dict[str, Any], user: dict[str, str], values: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """A `view_submission` payload: the modal as opened, with what the person typed."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "console"},
        "user": user,
        "api_app_id": "A0001",
        "token": "unused",
        "trigger_id": new_trigger(),
        "view": {
            "id": view.get("id", "V0001"),
            "team_id": TEAM,
            "type": "modal",
            "callback_id": view.get("callback_id", ""),
            "private_metadata": view.get("private_metadata", ""),
            "blocks": view.get("blocks", []),
            "state": {"values": values},
            "hash": "h",
            "title": view.get("title"),
        },
    }
