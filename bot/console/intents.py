"""What a person does in the console, turned into the signed request Slack would send.

The browser posts an intent (type a command, click a button or choose from a menu on a message,
a private note or the Home tab, open the Home tab, submit or close a modal) as plain JSON. The
server looks up what Slack would know (the button's value, the menu's options, the modal as
opened, the Home tab as published), builds Slack's payload, signs it with the app's signing
secret, and posts it to its own `/slack/events` over HTTP: the same listeners, the same checks
as in Slack. The browser names a button only by where it is; what it carries comes from what
the bot sent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from bot.console.local_slack import LocalSlack
from bot.console.slack_payloads import (
    FORM,
    JSON,
    button_click,
    element_action,
    ephemeral_click,
    home_click,
    home_opened,
    interaction_form,
    message_event,
    new_trigger,
    session_stopped,
    signature_headers,
    slack_user,
    slash_command_form,
    view_submission,
)
from bot.slack.payloads import MESSAGE_TS, SLACK_ID
from bot.words import commands as command_words

COMMAND = "/agent"
"""The app's one slash command, as the manifests name it: the console sends no other."""
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


class Click(_Intent):
    """A click on a button, or a choice from a menu (`option`: the chosen option's value), on
    a message, a private note (`note_id`) or the person's own Home tab (`home`)."""

    kind: Literal["click"]
    message_ts: str | None = Field(None, pattern=MESSAGE_TS)
    note_id: str | None = Field(None, max_length=64)
    home: bool = False
    block_index: int | None = Field(None, ge=0, lt=100)
    """Which block the element is in; None: the first with that action id."""
    action_id: str = Field(max_length=255)
    option: str | None = Field(None, max_length=150)

    @model_validator(mode="after")
    def _one_place(self) -> Click:
        if [self.message_ts is not None, self.note_id is not None, self.home].count(True) != 1:
            raise ValueError("a click is on one message, one note or the Home tab")
        return self


class OpenHome(_Intent):
    """The person opens the app's Home tab."""

    kind: Literal["home"]


class OpenMessages(_Intent):
    """The person opens the app's Messages tab (their direct message with it)."""

    kind: Literal["messages"]


class WriteToApp(_Intent):
    """The person writes to the app in its Messages tab: a new thread's first message."""

    kind: Literal["write"]
    text: str = Field(min_length=1, max_length=COMMAND_TEXT_LIMIT)


class SubmitView(_Intent):
    kind: Literal["submit"]
    view_id: str = Field(max_length=32)
    values: dict[str, dict[str, str]] = Field(default_factory=dict)
    """block id -> action id -> what was typed."""


class ReplyInThread(_Intent):
    """The person writes in a thread (Slack's "Reply…" box): a `message` event for the app."""

    kind: Literal["reply"]
    thread_ts: str = Field(pattern=MESSAGE_TS)
    text: str = Field(min_length=1, max_length=COMMAND_TEXT_LIMIT)


class StopSession(_Intent):
    """Slack's own Stop on a thread whose agent session is `processing`."""

    kind: Literal["stop_session"]
    thread_ts: str = Field(pattern=MESSAGE_TS)


class CloseView(_Intent):
    kind: Literal["close"]
    view_id: str = Field(max_length=32)


Intents = (
    TypeCommand
    | Click
    | OpenHome
    | OpenMessages
    | WriteToApp
    | SubmitView
    | CloseView
    | ReplyInThread
    | StopSession
)
Intent = Annotated[Intents, Field(discriminator="kind")]
INTENT = TypeAdapter[Intents](Intent)
INTERACTIVE = frozenset({"button", "static_select", "overflow"})
"""The elements the bot sends that a person can use."""


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
            return await self._close(intent, base_url)
        if isinstance(intent, TypeCommand):
            if intent.command != COMMAND:
                # Slack answers its own commands (`/help`) itself; the console has only the app's.
                raise IntentRefused(command_words.console_only(COMMAND, intent.command))
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
                self._answer_note(intent, answer)
        elif isinstance(intent, Click):
            status, answer = await self._post(base_url, self._click(intent, response_url))
        elif isinstance(intent, ReplyInThread | OpenHome | StopSession | OpenMessages | WriteToApp):
            status, answer = await self._event(intent, base_url)
        else:
            status, answer = await self._post(base_url, self._submission(intent))
            errors = answer.get("errors") if answer.get("response_action") == "errors" else None
            self.slack.close_view(intent.view_id, errors)
        await self.slack.notify()
        return {"status": status, "answer": answer}

    async def _event(
        self,
        intent: ReplyInThread | OpenHome | StopSession | OpenMessages | WriteToApp,
        base_url: str,
    ) -> tuple[int, dict[str, Any]]:
        """An intent Slack sends on as an Events API callback."""
        if isinstance(intent, OpenMessages):
            return await self._post(base_url, home_opened(intent.user, tab="messages"), JSON)
        if isinstance(intent, WriteToApp):
            channel, text = f"D{intent.user}", intent.text.strip()
            ts = self.slack.add_person_message(intent.user, channel, None, text)
            body = message_event(channel, intent.user, text, ts, None)
            return await self._post(base_url, body, JSON)
        if isinstance(intent, ReplyInThread):
            found = self.slack.messages.get(intent.thread_ts)
            if found is None or not _sees(intent.user, found.channel):
                raise IntentRefused(f"no thread {intent.thread_ts}")
            channel = found.channel
            text = intent.text.strip()
            ts = self.slack.add_person_message(intent.user, channel, intent.thread_ts, text)
            body = message_event(channel, intent.user, text, ts, intent.thread_ts)
            return await self._post(base_url, body, JSON)
        if isinstance(intent, StopSession):
            return await self._stop_session(intent, base_url)
        body = home_opened(intent.user, self.slack.home_tabs.get(intent.user))
        return await self._post(base_url, body, JSON)

    async def _stop_session(self, intent: StopSession, base_url: str) -> tuple[int, dict[str, Any]]:
        root = self.slack.messages.get(intent.thread_ts)
        session = root and self.slack.agents.session(root.channel, root.ts)
        if root is None or not session or session.status != "processing":
            raise IntentRefused("Slack shows its Stop only while the agent is processing")
        body = session_stopped(root.channel, root.ts, intent.user)
        return await self._post(base_url, body, JSON)

    def _answer_note(self, intent: TypeCommand, answer: dict[str, Any]) -> None:
        """The command's answer, for its typist only: judged as Slack judges a response."""
        refused = self.slack.judge("response", answer)
        text = str(answer["text"])
        if refused is not None:
            text = f"{intent.command} failed: Slack refused its answer ({refused.error})."
        blocks = answer.get("blocks") if refused is None else None
        self.slack.add_private_note(
            intent.user, self.channel, None, text, blocks if isinstance(blocks, list) else None
        )

    def _trigger(self, user: str) -> str:
        trigger = new_trigger()
        self.slack.triggers[trigger] = user
        return trigger

    def _click(self, intent: Click, response_url: str) -> str:
        user = self._user(intent.user)
        if intent.home:
            view = self.slack.home_tabs.get(intent.user)
            if view is None:
                raise IntentRefused("no Home tab published for this person")
            action = self._action(view.get("blocks", []), intent)
            payload = home_click(
                view_id=str(view["id"]),
                action_id=intent.action_id,
                value="",
                user=user,
                trigger_id=self._trigger(intent.user),
                action=action,
                view=view,
            )
        elif intent.note_id is not None:
            note = next((n for n in self.slack.private_notes if n.id == intent.note_id), None)
            if note is None or note.user != intent.user:
                raise IntentRefused("no such note for this person")
            payload = ephemeral_click(
                channel=note.channel or self.channel,
                message_ts=f"{note.at:.6f}",
                action=self._action(note.blocks, intent),
                user=user,
                response_url=f"{response_url}~{note.id}",  # so the answer may redraw the note
                trigger_id=self._trigger(intent.user),
            )
        else:
            message = self.slack.messages.get(str(intent.message_ts))
            if message is None or not _sees(intent.user, message.channel):
                raise IntentRefused("no such message")
            action = self._action(message.blocks, intent)
            payload = button_click(
                message=message,
                action_id=intent.action_id,
                value="",
                user=user,
                response_url=response_url,
                trigger_id=self._trigger(intent.user),
                action=action,
            )
        return interaction_form(payload)

    def _action(self, blocks: list[dict[str, Any]], intent: Click) -> dict[str, Any]:
        """What Slack would send for the element: looked up in what the bot sent."""
        indexes = range(len(blocks)) if intent.block_index is None else [intent.block_index]
        for index in indexes:
            block = blocks[index] if index < len(blocks) else {}
            elements = list(block.get("elements", [])) if block.get("type") == "actions" else []
            if "accessory" in block:
                elements.append(block["accessory"])
            for element in elements:
                if element.get("action_id") != intent.action_id:
                    continue
                if element.get("type") not in INTERACTIVE:
                    raise IntentRefused(f"{element.get('type')} is not something to click")
                try:
                    return element_action(element, _block_id(block), intent.option)
                except ValueError as error:
                    raise IntentRefused(str(error)) from error
        raise IntentRefused("no such button or menu")

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

    async def _close(self, intent: CloseView, base_url: str) -> dict[str, Any]:
        """Close the modal; tell the bot (`view_closed`) when it asked, as Slack does only for
        a modal with `notify_on_close`."""
        opened = self.slack.opened.get(intent.view_id)
        notify = opened is not None and opened.open and opened.user == intent.user
        self.slack.close_view(intent.view_id)
        await self.slack.notify()
        if opened is None or not notify or not opened.view.get("notify_on_close"):
            return {"status": 200}
        payload = view_submission(view=opened.view, user=self._user(intent.user), values={})
        closed = interaction_form({**payload, "type": "view_closed", "is_cleared": False})
        status, answer = await self._post(base_url, closed)
        return {"status": status, "answer": answer}

    def _user(self, user_id: str) -> dict[str, str]:
        return slack_user(user_id, self.people[user_id].name)

    async def _post(
        self, base_url: str, body: str, content_type: str = FORM
    ) -> tuple[int, dict[str, Any]]:
        headers = signature_headers(self.signing_secret, body, content_type=content_type)
        async with self.session.post(
            f"{base_url}/slack/events", data=body.encode(), headers=headers
        ) as response:
            text = await response.text()
        try:
            answer = json.loads(text) if text.strip() else {}
        except ValueError:
            answer = {"text": text}
        return response.status, answer if isinstance(answer, dict) else {}


def _sees(user: str, channel: str) -> bool:
    """Everyone sees the channels here; a direct message with the app only its person does
    (`D` + the user id, as `conversations.open` answers here, or the user id itself)."""
    if channel.startswith("D"):
        return channel == f"D{user}"
    if channel.startswith(("U", "W")):
        return channel == user
    return True


def _block_id(block: dict[str, Any]) -> str:
    """The block's id; Slack makes one up for a block sent without, the same on every read."""
    given = block.get("block_id")
    if isinstance(given, str) and given:
        return given
    digest = hashlib.sha256(json.dumps(block, sort_keys=True).encode()).hexdigest()
    return digest[:5]
