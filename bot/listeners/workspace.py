"""What Slack says about the workspace, and clicks no listener claims.

A user group changed: the directory forgets what it cached of it. The app was uninstalled or
its tokens revoked: the operator reads it in the log. Each is acknowledged, so Slack gets its 200.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

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


async def unknown_action(ack: AsyncAck, body: dict[str, Any]) -> None:
    await ack()
    log.info("click on an unknown action refused")


async def app_event(ack: AsyncAck, body: dict[str, Any]) -> None:
    await ack()
    event = body.get("event")
    kind = event.get("type") if isinstance(event, dict) else None
    log.warning("Slack says %s for team %s", kind, body.get("team_id"))
