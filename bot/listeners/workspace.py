"""What Slack says about the workspace, and clicks no listener claims.

A user group changed: the directory forgets what it cached of it. Someone joined or left a
channel: who is in it is asked again, and their Home tab shows what that changes. The app was
uninstalled or its tokens revoked: the operator reads it in the log. Each is acknowledged, so
Slack gets its 200.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.slack.channel_members import ChannelMembers
from bot.slack.directory import ApproverDirectory

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class GroupMembershipEvents:
    """Slack says a user group changed: forget what we cached about it."""

    directory: ApproverDirectory

    async def on_members_changed(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        group = event.get("subteam_id")
        if isinstance(group, str):
            await self.directory.forget_group(group)

    async def on_group_updated(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        group = (event.get("subteam") or {}).get("id")
        if isinstance(group, str):
            await self.directory.forget_group(group)


@dataclass(kw_only=True)
class ChannelMembershipEvents:
    """`member_joined_channel`, `member_left_channel`: forget who was in the channel, then let
    the person's Home tab catch up (`moved`)."""

    channels: ChannelMembers
    moved: Callable[[str], Awaitable[None]]
    """Told who joined or left, once the channel is forgotten (`HomeWatch.member_moved`)."""

    async def on_member_changed(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        channel, user = event.get("channel"), event.get("user")
        if not isinstance(channel, str) or not channel:
            return
        await self.channels.forget(channel)
        if isinstance(user, str) and user:
            await self.moved(user)


async def unknown_action(ack: AsyncAck, body: dict[str, Any]) -> None:
    await ack()
    log.info("click on an unknown action refused")


async def app_event(ack: AsyncAck, body: dict[str, Any]) -> None:
    await ack()
    event = body.get("event")
    kind = event.get("type") if isinstance(event, dict) else None
    log.warning("Slack says %s for team %s", kind, body.get("team_id"))
