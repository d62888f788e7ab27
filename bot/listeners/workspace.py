"""What Slack says about the workspace, and clicks no listener claims.

A user group changed: the directory forgets what it cached of it. Someone joined or left a
channel: who is in it is asked again, and their Home tab shows what that changes. The app was
uninstalled or its tokens revoked: the operator reads it in the log. Each is acknowledged, so
Slack gets its 200, and each event is parsed first (`bot.slack.events.listener`): one of another
shape is ignored with one log line.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.slack.channel_members import ChannelMembers
from bot.slack.directory import ApproverDirectory
from bot.slack.events import MemberChanged, SubteamMembersChanged, SubteamUpdated

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class GroupMembershipEvents:
    """Slack says a user group changed: forget what we cached about it."""

    directory: ApproverDirectory

    async def on_members_changed(self, event: SubteamMembersChanged) -> None:
        await self.directory.forget_group(event.subteam_id)

    async def on_group_updated(self, event: SubteamUpdated) -> None:
        await self.directory.forget_group(event.subteam.id)


@dataclass(kw_only=True)
class ChannelMembershipEvents:
    """`member_joined_channel`, `member_left_channel`: forget who was in the channel, then let
    the person's Home tab catch up (`moved`)."""

    channels: ChannelMembers
    moved: Callable[[str], Awaitable[None]]
    """Told who joined or left, once the channel is forgotten (`HomeWatch.member_moved`)."""

    async def on_member_changed(self, event: MemberChanged) -> None:
        if not event.channel:
            return
        await self.channels.forget(event.channel)
        if event.user:
            await self.moved(event.user)


async def unknown_action(ack: AsyncAck, body: dict[str, Any]) -> None:
    await ack()
    log.info("click on an unknown action refused")


async def app_event(ack: AsyncAck, body: dict[str, Any]) -> None:
    await ack()
    event = body.get("event")
    kind = event.get("type") if isinstance(event, dict) else None
    log.warning("Slack says %s for team %s", kind, body.get("team_id"))
