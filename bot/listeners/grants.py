"""Grants from Slack: the card's "Approve and allow…" menu, **Revoke**, and `/agent grants`.

Choosing a grant is a decision like a click on Approve: it goes through the decision script,
which approves the call and creates the grant in one step, or refuses both (not an approver,
not offered under this call's rule). Revoking is open to any member of the workspace in the
grant's channel (it can only bring the cards back); to people outside it (Slack Connect,
guests: `bot.slack.members`) only with `EXTERNAL_DECIDERS=allow`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientError
from pydantic import Field, ValidationError
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.grants import grants_listing_blocks
from bot.blocks.parts import Block, section
from bot.listeners.approvals import ApprovalActions
from bot.slack.client import response_url as response_url_client
from bot.slack.client import send_later
from bot.slack.members import StandingUnknown, WorkspaceMembers
from bot.slack.payloads import MESSAGE_TS, ApprovalRef, SlackUser, _Channel, _Payload
from bot.words import choices as choice_messages
from bot.words import members as member_messages
from bot.words import runs as messages
from runtime.decisions import Choice, GrantChoice
from runtime.grants import GRANT_CHOICES, GrantStore
from runtime.record import GRANT_ID_PATTERN, GrantScope

log = logging.getLogger(__name__)


class _Option(_Payload):
    value: str = Field(max_length=150)


class _Selected(_Payload):
    action_id: str = Field(max_length=255)
    block_id: str | None = Field(None, max_length=255)
    selected_option: _Option | None = None
    value: str | None = Field(None, max_length=2000)


class _Container(_Payload):
    message_ts: str | None = Field(None, pattern=MESSAGE_TS)
    is_ephemeral: bool = False


class MenuChoice(_Payload):
    """A choice from a menu or a button outside the card's three buttons."""

    user: SlackUser
    channel: _Channel
    container: _Container
    actions: list[_Selected] = Field(min_length=1, max_length=1)
    response_url: str | None = Field(None, pattern=r"^https?://", max_length=2048)
    """Where an ephemeral message clicked (the `/agent grants` list) is redrawn."""

    @property
    def action(self) -> _Selected:
        return self.actions[0]


def parse_grant_value(value: str) -> tuple[ApprovalRef, GrantScope, int]:
    """`<run id>:<approval id>:<scope>:<seconds>:<digest>` (`grant_blocks.grant_value`), one of
    the offered grants; ValueError otherwise. A menu drawn before menus carried the digest has
    none: refused as stale by the decision script."""
    run_id, approval_id, scope, seconds, *digest = value.split(":")
    if len(digest) > 1:
        raise ValueError("not an offered grant")
    ref = ApprovalRef(run_id=run_id, approval_id=approval_id, digest=digest[0] if digest else None)
    for offered_scope, offered_seconds in GRANT_CHOICES:
        if scope == offered_scope and seconds == str(offered_seconds):
            return ref, offered_scope, int(seconds)
    raise ValueError("not an offered grant")


@dataclass(kw_only=True)
class GrantActions:
    actions: ApprovalActions
    store: GrantStore
    client: AsyncWebClient
    members: WorkspaceMembers
    outsiders_allowed: bool = False
    """`EXTERNAL_DECIDERS=allow`."""

    async def on_grant_chosen(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        try:
            chosen = MenuChoice.model_validate(body)
            option = chosen.action.selected_option
            ref, scope, seconds = parse_grant_value(option.value if option else "")
        except (ValidationError, ValueError):
            log.warning("grant choice with an invalid payload refused")
            return
        choice = Choice(
            outcome="approved",
            user_id=chosen.user.id,
            user_name=chosen.user.display,
            grant=GrantChoice(id=self.store.new_id(ref.run_id), scope=scope, seconds=seconds),
        )
        await self.actions.record(
            ref, choice, chosen.user, chosen.channel.id, chosen.container.message_ts
        )

    async def on_revoke(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        try:
            click = MenuChoice.model_validate(body)
            grant_id = click.action.value or ""
            if not _valid_grant_id(grant_id):
                raise ValueError(grant_id)
        except (ValidationError, ValueError):
            log.warning("revoke click with an invalid payload refused")
            return
        channel, user = click.channel.id, click.user
        try:
            standing = await self.members.standing(user.id, claimed_team=user.team_id)
        except StandingUnknown:
            self.actions.tell(channel, user.id, None, member_messages.STANDING_UNKNOWN)
            return
        if not standing.inside and not self.outsiders_allowed:
            log.info("revoke of grant %s by %s refused: outside the workspace", grant_id, user.id)
            self.actions.tell(channel, user.id, None, member_messages.OUTSIDE_WORKSPACE)
            return
        try:
            grant = await self.store.revoke(
                grant_id,
                channel=channel,
                user_id=user.id,
                user_name=user.display,
                team=standing.team,
            )
        except RedisError:
            self.actions.tell(channel, user.id, None, messages.TRY_AGAIN)
            return
        if click.container.is_ephemeral and click.response_url:
            # The `/agent grants` list the click came from, drawn again without this grant.
            send_later(
                self.actions.tasks, self._relist(channel, click.response_url), f"relist:{grant_id}"
            )
        if grant is None:
            self.actions.tell(channel, user.id, None, choice_messages.GRANT_GONE)
            return
        log.info("grant %s revoked by %s", grant.id, user.id)
        self.actions.tell(
            channel, user.id, None, choice_messages.grant_revoked(grant.tool, grant.scope, channel)
        )
        text = choice_messages.grant_revoked_line(grant.tool, grant.user_id, user.id)
        send_later(self.actions.tasks, self._redraw_lines(grant.id, text), f"revoked:{grant.id}")

    async def _redraw_lines(self, grant_id: str, text: str) -> None:
        """Every quiet line of a revoked grant, without its **Revoke**."""
        for channel, ts in await self.store.lines(grant_id):
            try:
                await self.client.chat_update(
                    channel=channel, ts=ts, text=text, blocks=[section(text)]
                )
            except (SlackApiError, ClientError, TimeoutError) as error:
                log.warning("grant %s: a line in %s not redrawn (%s)", grant_id, channel, error)

    async def _relist(self, channel: str, response_url: str) -> None:
        text, blocks = await self.listing(channel)
        try:
            await response_url_client(response_url, self.client).send(
                text=text, blocks=blocks or None, replace_original=True, response_type="ephemeral"
            )
        except (ClientError, TimeoutError) as error:
            log.warning("grants listing not redrawn (%s)", type(error).__name__)

    async def listing(self, channel: str) -> tuple[str, list[Block]]:
        """`/agent grants`: the channel's active grants, each with **Revoke**."""
        try:
            grants = await self.store.active(channel)
        except RedisError:
            return messages.QUEUE_UNAVAILABLE, []
        if not grants:
            return choice_messages.NO_GRANTS, []
        return choice_messages.grants_heading(len(grants)), grants_listing_blocks(grants)


def _valid_grant_id(value: str) -> bool:
    return re.match(GRANT_ID_PATTERN, value) is not None
