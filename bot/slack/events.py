"""The Events API events we listen to, as we accept them: each parsed once, at its listener.

A signed event can carry fields of shapes its type never has (a `subteam_updated` whose
`subteam` is a string): read as a dict, one raised `AttributeError`, Slack got a 500 with a
traceback and sent the event again, three times. `listener` acknowledges first, parses the event
into its model, and hands a listener only an event of the right shape; any other is ignored with
one log line naming its type and the first field that is wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from slack_bolt.context.ack.async_ack import AsyncAck

log = logging.getLogger(__name__)


class SlackEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    type: str


class Subteam(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str


class SubteamMembersChanged(SlackEvent):
    subteam_id: str


class SubteamUpdated(SlackEvent):
    subteam: Subteam


class MemberChanged(SlackEvent):
    """`member_joined_channel`, `member_left_channel`."""

    channel: str
    user: str


class HomeOpened(SlackEvent):
    user: str
    tab: str = "home"
    channel: str | None = None
    """The person's direct message with the app (its Messages tab's)."""


class Said(SlackEvent):
    """`message` (of any subtype) and `app_mention`: every field optional (a bot's message has no
    `user`, an edit's words are in `message`), but of its type when present."""

    channel: str | None = None
    user: str | None = None
    text: str | None = None
    ts: str | None = None
    thread_ts: str | None = None
    subtype: str | None = None
    bot_id: str | None = None
    channel_type: str | None = None
    """`im` for a direct message with the app (`message.im`)."""


class SessionStopped(SlackEvent):
    """`agent_session_stopped`: a person pressed Slack's own Stop on a run's thread."""

    channel: str
    thread_ts: str
    user: str


def is_direct(channel: str) -> bool:
    """A direct message with the app: Slack's ids of those begin with D."""
    return channel.startswith("D")


E = TypeVar("E", bound=SlackEvent)
Listener = Callable[[AsyncAck, dict[str, Any]], Awaitable[None]]


def listener(model: type[E], handle: Callable[[E], Awaitable[None]]) -> Listener:
    """A Bolt event listener: acknowledge, then `handle` the event as `model`, or log one line
    and ignore it if it is not of that shape."""

    # Bolt passes the arguments a listener names: `ack` and `event`.
    async def on_event(ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        try:
            parsed = model.model_validate(event)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            log.warning("%s event ignored: %s: %s", event.get("type"), where, first["msg"])
            return
        await handle(parsed)

    return on_event
