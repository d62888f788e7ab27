"""Requests into the bot, signed exactly the way Slack signs them (with the console's builders)."""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp

from bot.console.slack_payloads import (
    button_click,
    home_click,
    interaction_form,
    new_trigger,
    signature_headers,
    slack_user,
    slash_command_form,
    view_submission,
)
from tests.support.fake_slack import FakeSlack, Message

__all__ = ["SlackSender", "signature_headers"]


class SlackSender:
    """Plays Slack's side: slash commands, button clicks and modal submissions."""

    def __init__(
        self, session: aiohttp.ClientSession, url: str, secret: str, slack: FakeSlack
    ) -> None:
        self.session = session
        self.url = url
        self.secret = secret
        self.slack = slack

    def user(self, user_id: str) -> dict[str, str]:
        """The payload's `user`, of the team the fake Slack's `users.info` gives them."""
        team = self.slack.people.get(user_id, {}).get("team_id")
        return slack_user(user_id, team=team) if isinstance(team, str) else slack_user(user_id)

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
        body = slash_command_form(
            text=text,
            user=user,
            channel=channel,
            command=command,
            response_url=self.slack.response_url(user),
            trigger_id=trigger_id or new_trigger(),
        )
        status, text_body = await self.post(body)
        return status, (json.loads(text_body) if text_body.startswith("{") else {})

    def click_payload(
        self, card: Message, action_id: str, *, user: str, value: str | None = None
    ) -> dict[str, Any]:
        action = next((a for a in card.actions() if a["action_id"] == action_id), None)
        if action is None and value is None:
            raise AssertionError(f"card has no {action_id} button: {card.action_ids()}")
        # The block the button is in, as Slack says (the card's buttons are in `approval`).
        block_id = next(
            (
                b.get("block_id") or "approval"
                for b in card.blocks
                if b.get("type") == "actions" and action in b["elements"]
            ),
            "approval",
        )
        return button_click(
            message=card,
            action_id=action_id,
            value=value if value is not None else action["value"],  # type: ignore[index]
            user=self.user(user),
            response_url=self.slack.response_url(user),
            trigger_id=new_trigger(),
            block_id=block_id,
        )

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
        return await self.post(interaction_form(payload))

    async def click(
        self, card: Message, action_id: str, *, user: str, value: str | None = None
    ) -> tuple[int, str]:
        return await self.interact(self.click_payload(card, action_id, user=user, value=value))

    async def choose_grant(self, card: Message, value: str, *, user: str, text: str = "x") -> None:
        """Pick `value` (`text` on screen) from the card's "Approve and allow…" menu, or a
        hand-made value, as Slack sends it."""
        payload = self.click_payload(card, "approve", user=user)
        payload["actions"] = [
            {
                "type": "static_select",
                "action_id": "approve_with_grant",
                "block_id": "grant_menu",
                "selected_option": {"text": {"type": "plain_text", "text": text}, "value": value},
                "action_ts": f"{time.time():.6f}",
            }
        ]
        status, _ = await self.interact(payload)
        assert status == 200

    async def click_home(
        self, user: str, action_id: str, value: str, view_id: str | None = None
    ) -> tuple[int, str]:
        """A click on a button of `user`'s Home tab."""
        payload = home_click(
            view_id=view_id or f"VHOME{user}",
            action_id=action_id,
            value=value,
            user=self.user(user),
            trigger_id=new_trigger(),
        )
        return await self.interact(payload)

    async def submit_view(
        self, view: dict[str, Any], *, user: str, values: dict[str, dict[str, Any]]
    ) -> tuple[int, str]:
        return await self.interact(view_submission(view=view, user=self.user(user), values=values))

    async def reject(self, card: Message, *, user: str, reason: str) -> tuple[int, str]:
        """Click Reject, wait for the modal, type the reason and submit it."""
        return await self.in_modal(card, "reject", user=user, text=reason)

    async def answer(self, card: Message, *, user: str, text: str) -> tuple[int, str]:
        """Click **Answer instead**, wait for the modal, type the answer and submit it."""
        return await self.in_modal(card, "answer", user=user, text=text)

    async def approve_with_note(self, card: Message, *, user: str, note: str) -> tuple[int, str]:
        """Click **Approve with a note…**, wait for the modal, type the note and submit it."""
        return await self.in_modal(card, "approve_note", user=user, text=note)

    async def open_modal(
        self, card: Message, action_id: str, *, user: str, value: str | None = None
    ) -> dict[str, Any]:
        """Click a card's button that opens a modal; the modal, once Slack has it."""
        opened = len(self.slack.views)
        status, _ = await self.click(card, action_id, user=user, value=value)
        assert status == 200
        await self.slack.wait_for(lambda: len(self.slack.views) > opened, what=action_id)
        return self.slack.views[-1]

    async def submit_text(self, view: dict[str, Any], *, user: str, text: str) -> tuple[int, str]:
        """Submit a modal that asks one text (a reason, an answer, a note)."""
        values = {"reason": {"reason_input": {"type": "plain_text_input", "value": text}}}
        return await self.submit_view(view, user=user, values=values)

    async def in_modal(
        self, card: Message, action_id: str, *, user: str, text: str
    ) -> tuple[int, str]:
        view = await self.open_modal(card, action_id, user=user)
        return await self.submit_text(view, user=user, text=text)
