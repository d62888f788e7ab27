"""Requests into the bot, signed exactly the way Slack signs them."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

import aiohttp

from tests.fake_slack import FakeSlack, Message

_triggers = itertools.count(1)


def signature_headers(secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's v0 scheme: HMAC-SHA256 over `v0:{timestamp}:{body}` with the signing secret."""
    stamp = int(time.time()) if timestamp is None else timestamp
    base = f"v0:{stamp}:{body}".encode()
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(stamp),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def _user(user_id: str) -> dict[str, str]:
    return {"id": user_id, "username": user_id.lower(), "name": user_id.lower(), "team_id": "T0001"}


def new_trigger() -> str:
    return f"{next(_triggers)}.{time.time_ns()}.triggerhash"


class SlackSender:
    """Plays Slack's side: slash commands, button clicks and modal submissions."""

    def __init__(
        self, session: aiohttp.ClientSession, url: str, secret: str, slack: FakeSlack
    ) -> None:
        self.session = session
        self.url = url
        self.secret = secret
        self.slack = slack

    async def post(self, body: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        async with self.session.post(
            self.url, data=body.encode(), headers=headers or signature_headers(self.secret, body)
        ) as response:
            return response.status, await response.text()

    async def command(
        self,
        text: str,
        *,
        user: str = "UALICE",
        channel: str = "CGENERAL",
        command: str = "/agent",
        trigger_id: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        body = urlencode(
            {
                "token": "unused",
                "team_id": "T0001",
                "team_domain": "test",
                "channel_id": channel,
                "channel_name": "general",
                "user_id": user,
                "user_name": user.lower(),
                "command": command,
                "text": text,
                "api_app_id": "A0001",
                "response_url": self.slack.response_url(user),
                "trigger_id": trigger_id or new_trigger(),
            }
        )
        status, text_body = await self.post(body)
        return status, (json.loads(text_body) if text_body.startswith("{") else {})

    def click_payload(
        self, card: Message, action_id: str, *, user: str, value: str | None = None
    ) -> dict[str, Any]:
        action = next((a for a in card.actions() if a["action_id"] == action_id), None)
        if action is None and value is None:
            raise AssertionError(f"card has no {action_id} button: {card.action_ids()}")
        return {
            "type": "block_actions",
            "team": {"id": "T0001", "domain": "test"},
            "user": _user(user),
            "api_app_id": "A0001",
            "token": "unused",
            "container": {
                "type": "message",
                "message_ts": card.ts,
                "channel_id": card.channel,
                "is_ephemeral": False,
                "thread_ts": card.thread_ts,
            },
            "trigger_id": new_trigger(),
            "channel": {"id": card.channel, "name": "general"},
            "message": {"ts": card.ts, "text": card.text, "blocks": card.blocks},
            "response_url": self.slack.response_url(user),
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "approval",
                    "text": {"type": "plain_text", "text": action_id},
                    "value": value if value is not None else action["value"],  # type: ignore[index]
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }

    async def event(self, event: dict[str, Any]) -> tuple[int, str]:
        """An Events API callback, JSON-bodied and signed like the rest."""
        body = json.dumps(
            {
                "token": "unused",
                "team_id": "T0001",
                "api_app_id": "A0001",
                "type": "event_callback",
                "event_id": f"Ev{time.time_ns()}",
                "event_time": int(time.time()),
                "event": event,
            }
        )
        headers = {**signature_headers(self.secret, body), "Content-Type": "application/json"}
        return await self.post(body, headers)

    async def interact(self, payload: dict[str, Any]) -> tuple[int, str]:
        return await self.post(urlencode({"payload": json.dumps(payload)}))

    async def click(
        self, card: Message, action_id: str, *, user: str, value: str | None = None
    ) -> tuple[int, str]:
        return await self.interact(self.click_payload(card, action_id, user=user, value=value))

    async def submit_view(
        self, view: dict[str, Any], *, user: str, values: dict[str, dict[str, Any]]
    ) -> tuple[int, str]:
        payload = {
            "type": "view_submission",
            "team": {"id": "T0001", "domain": "test"},
            "user": _user(user),
            "api_app_id": "A0001",
            "token": "unused",
            "trigger_id": new_trigger(),
            "view": {
                "id": "V0001",
                "team_id": "T0001",
                "type": "modal",
                "callback_id": view.get("callback_id", ""),
                "private_metadata": view.get("private_metadata", ""),
                "blocks": view.get("blocks", []),
                "state": {"values": values},
                "hash": "h",
                "title": view.get("title"),
            },
        }
        return await self.interact(payload)

    async def reject(self, card: Message, *, user: str, reason: str) -> tuple[int, str]:
        """Click Reject, wait for the modal, type the reason and submit it."""
        opened = len(self.slack.views)
        status, _ = await self.click(card, "reject", user=user)
        assert status == 200
        await self.slack.wait_for(lambda: len(self.slack.views) > opened, what="reject modal")
        view = self.slack.views[-1]
        return await self.submit_view(
            view,
            user=user,
            values={"reason": {"reason_input": {"type": "plain_text_input", "value": reason}}},
        )
