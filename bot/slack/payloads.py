"""Slack's payloads as we accept them: validated at the door, everything else refused.

Slack signs what it sends, but a signed payload can still carry values that did not come from
us (a replayed or hand-made button value); ids are checked here and again in Redis.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.jobs import APPROVAL_ID_PATTERN, RUN_ID_PATTERN

SLACK_ID = r"^[A-Z0-9]{2,32}$"
MESSAGE_TS = r"^\d{1,12}\.\d{1,9}$"


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


_M = TypeVar("_M", bound=BaseModel)


class SlashCommand(_Payload):
    command: str = Field(max_length=64)
    text: str = Field("", max_length=4000)
    user_id: str = Field(pattern=SLACK_ID)
    user_name: str | None = Field(None, max_length=256)
    channel_id: str = Field(pattern=SLACK_ID)
    trigger_id: str = Field(max_length=256)
    response_url: str | None = Field(None, pattern=r"^https?://", max_length=2048)


class SlackUser(_Payload):
    id: str = Field(pattern=SLACK_ID)
    username: str | None = Field(None, max_length=256)
    name: str | None = Field(None, max_length=256)
    team_id: str | None = Field(None, max_length=64)
    """The person's own team: another organisation's for a Slack Connect user."""

    @property
    def display(self) -> str | None:
        return self.username or self.name


DIGEST = r"^[0-9a-f]{64}$"


class ApprovalRef(_Payload):
    """`<run id>:<approval id>:<digest>`: which call, and the digest of the call as the element
    carrying it showed it (`bot.blocks.cards.button_value`). The decision script refuses a
    digest that is not the call's current one; a value drawn before cards carried one (two
    parts) has `digest` None and is refused the same way (the card is then redrawn with it)."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    approval_id: str = Field(pattern=APPROVAL_ID_PATTERN)
    digest: str | None = Field(None, pattern=DIGEST)

    @classmethod
    def parse(cls, value: object) -> ApprovalRef:
        if not isinstance(value, str) or value.count(":") not in (1, 2):
            raise ValueError("not an approval reference")
        run_id, approval_id, *digest = value.split(":")
        return cls(run_id=run_id, approval_id=approval_id, digest=digest[0] if digest else None)


class _Channel(_Payload):
    id: str = Field(pattern=SLACK_ID)


class _Container(_Payload):
    message_ts: str | None = Field(None, pattern=MESSAGE_TS)


class _Action(_Payload):
    action_id: str = Field(max_length=255)
    value: str = Field(max_length=2000)


class _Click(_Payload):
    """What every click on one button carries, wherever the button is."""

    user: SlackUser
    actions: list[_Action] = Field(min_length=1, max_length=1)
    trigger_id: str = Field(max_length=256)

    @property
    def action(self) -> _Action:
        return self.actions[0]


class ButtonClick(_Click):
    """A click on a button of a message: its channel, and the message as the container."""

    channel: _Channel
    container: _Container


class EphemeralClick(_Click):
    """A click on a button of a message only its reader sees (an answer to `/agent`): Slack
    sends no message with it, and a `response_url` to redraw it by."""

    channel: _Channel
    response_url: str | None = Field(None, pattern=r"^https?://", max_length=2048)


class TaskOffer(_Payload):
    """What **Run as a task** carries from the "Did you mean …?" answer to its click: the
    command as typed and the agent it goes to. The run's id is made from the command's trigger
    id, as the command's own would have been, so a second click is the same run."""

    command: str = Field(max_length=64)
    agent: str = Field(max_length=64)
    task: str = Field(min_length=1, max_length=200)
    trigger: str = Field(max_length=256)


class _ViewContainer(_Payload):
    type: Literal["view"]
    view_id: str | None = Field(None, max_length=64)


class HomeClick(_Click):
    """A click on a button of the app's Home tab: no channel, the view is the container."""

    container: _ViewContainer


class RejectMetadata(_Payload):
    """What a modal opened from a call's button (Reject, **Answer instead**, **Approve with a
    note…**) carries from the click to the submission."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    approval_id: str = Field(pattern=APPROVAL_ID_PATTERN)
    channel: str = Field(pattern=SLACK_ID)
    message_ts: str | None = Field(None, pattern=MESSAGE_TS)
    digest: str | None = Field(None, pattern=DIGEST)
    """The digest of the call as the clicked Reject showed it (None: a modal opened before
    modals carried one, refused as stale)."""


class _View(_Payload):
    private_metadata: str = Field(max_length=3000)
    state: dict[str, Any]


class ViewSubmission(_Payload):
    user: SlackUser
    view: _View

    def text_input(self, block_id: str, action_id: str) -> str:
        """The value typed in one input; "" if absent or of the wrong shape."""
        node: Any = self.view.state
        for key in ("values", block_id, action_id, "value"):
            node = node.get(key) if isinstance(node, dict) else None
        return node if isinstance(node, str) else ""

    @classmethod
    def with_metadata(
        cls, body: dict[str, Any], metadata: type[_M]
    ) -> tuple[ViewSubmission, _M] | None:
        """A modal's submission and what the modal carried from its click (its
        `private_metadata`, as `metadata`); None if either is not what we sent."""
        try:
            submission = cls.model_validate(body)
            return submission, metadata.model_validate_json(submission.view.private_metadata)
        except ValidationError:
            return None
