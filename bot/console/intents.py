"""What a person does in the console, turned into the signed request Slack would send.

The browser posts an intent (type a command, click a button, submit or close a modal) as
plain JSON. The server looks up what Slack would know (the button's value, the modal as
opened), builds Slack's payload, signs it with the app's signing secret, and posts it to its
own `/slack/events` over HTTP: the same listeners, the same checks as in Slack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from bot.console.local_slack import LocalSlack
from bot.console.slack_payloads import (
    button_click,
    interaction_form,
    new_trigger,
    signature_headers,
    slack_user,
    slash_command_form,
    view_submission,
)
from bot.payloads import MESSAGE_TS, SLACK_ID

COMMAND_TEXT_LIMIT = 4000
"""What the console's composer sends after a slash command, at most: longer is not sent, and
what was typed stays in the box, as in Slack's composer."""


class _Intent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    user: str = Field(pattern=SLACK_ID)


class TypeCommand(_Intent):
    kind: Literal["command"]
    command: str = Field(pattern=r"^/[a-z0-9_\-]{1,31}$")
    text: str = Field("", max_length=COMMAND_TEXT_LIMIT)


class ClickButton(_Intent):
    kind: Literal["click"]
    message_ts: str = Field(pattern=MESSAGE_TS)
    action_id: str = Field(max_length=255)


class SubmitView(_Intent):
    kind: Literal["submit"]
    view_id: str = Field(max_length=32)
    values: dict[str, dict[str, str]] = Field(default_factory=dict)
    """block id -> action id -> what was typed."""


class CloseView(_Intent):
    kind: Literal["close"]
    view_id: str = Field(max_length=32)


Intent = Annotated[TypeCommand | ClickButton | SubmitView | CloseView, Field(discriminator="kind")]
INTENT = TypeAdapter[TypeCommand | ClickButton | SubmitView | CloseView](Intent)


class IntentRefused(Exception):
    """The intent names something that is not there (a message, a button, a modal)."""


@dataclass(frozen=True, slots=True)
class Person:
    id: str
    name: str


@dataclass(kw_only=True)
class IntentSender:
    slack: LocalSlack
    session: aiohttp.ClientSession
    signing_secret: str
    channel: str
    channel_name: str
    people: dict[str, Person]

    async def send(self, intent: Any, base_url: str) -> dict[str, Any]:
        """Play `intent` into the bot at `base_url`; return Slack's view of the answer."""
        if intent.user not in self.people:
            raise IntentRefused(f"unknown person {intent.user}")
        response_url = f"{base_url}/console/response/{intent.user}"
        if isinstance(intent, CloseView):
            self.slack.close_view(intent.view_id)
            await self.slack.notify()
            return {"status": 200}
        if isinstance(intent, TypeCommand):
            trigger = self._trigger(intent.user)
            body = slash_command_form(
                text=intent.text,
                user=intent.user,
                user_name=self.people[intent.user].name,
                channel=self.channel,
                channel_name=self.channel_name,
                command=intent.command,
                response_url=response_url,
                trigger_id=trigger,
            )
            status, answer = await self._post(base_url, body)
            if answer.get("text"):
                self.slack.add_private_note(intent.user, self.channel, None, str(answer["text"]))
        elif isinstance(intent, ClickButton):
            status, answer = await self._post(base_url, self._click(intent, response_url))
        else:
            status, answer = await self._post(base_url, self._submission(intent))
            errors = answer.get("errors") if answer.get("response_action") == "errors" else None
            self.slack.close_view(intent.view_id, errors)
        await self.slack.notify()
        return {"status": status, "answer": answer}

    def _trigger(self, user: str) -> str:
        trigger = new_trigger()
        self.slack.triggers[trigger] = user
        return trigger

    def _click(self, intent: ClickButton, response_url: str) -> str:
        message = self.slack.messages.get(intent.message_ts)
        if message is None:
            raise IntentRefused("no such message")
        for block in message.blocks:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element.get("action_id") == intent.action_id:
                    payload = button_click(
                        message=message,
                        action_id=intent.action_id,
                        value=str(element.get("value", "")),
                        user=self._user(intent.user),
                        response_url=response_url,
                        trigger_id=self._trigger(intent.user),
                        block_id=str(block.get("block_id", "")),
                    )
                    return interaction_form(payload)
        raise IntentRefused("no such button")

    def _submission(self, intent: SubmitView) -> str:
        opened = self.slack.opened.get(intent.view_id)
        if opened is None or not opened.open or opened.user != intent.user:
            raise IntentRefused("no such modal open for this person")
        values = {
            block: {
                action: {"type": "plain_text_input", "value": text}
                for action, text in actions.items()
            }
            for block, actions in intent.values.items()
        }
        payload = view_submission(view=opened.view, user=self._user(intent.user), values=values)
        return interaction_form(payload)

    def _user(self, user_id: str) -> dict[str, str]:
        return slack_user(user_id, self.people[user_id].name)

    async def _post(self, base_url: str, body: str) -> tuple[int, dict[str, Any]]:
        headers = signature_headers(self.signing_secret, body)
        async with self.session.post(
            f"{base_url}/slack/events", data=body.encode(), headers=headers
        ) as response:
            text = await response.text()
        try:
            answer = json.loads(text) if text.strip() else {}
        except ValueError:
            answer = {"text": text}
        return response.status, answer if isinstance(answer, dict) else {}
