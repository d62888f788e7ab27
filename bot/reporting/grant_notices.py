"""The worker's side of grants in Slack: the quiet line a grant leaves in a thread, and who is in
an approver group (so a grant by someone who left the group no longer covers calls)."""

from __future__ import annotations

import logging

from aiohttp import ClientError
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError, SlackObjectFormationError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.grants import grant_used_blocks
from bot.slack.directory import ApproverDirectory, DirectoryUnavailable
from bot.words import choices as choice_messages
from runtime.grants import GrantStore, MembershipUnavailable
from runtime.record import PendingCall
from runtime.reporter import RunView

log = logging.getLogger(__name__)


class SlackGrantNotices:
    """`runtime.grants.check.GrantNotices` in Slack."""

    def __init__(self, client: AsyncWebClient, store: GrantStore) -> None:
        self._client = client
        self._store = store
        """Where each line is noted, so a revoke redraws it without its **Revoke**."""

    async def grant_used(self, run: RunView, call: PendingCall) -> None:
        grant = call.decision.by_grant if call.decision else None
        if grant is None or grant.user_id is None:
            return
        text = choice_messages.grant_used_line(call.tool, grant.user_id, grant.ends_at)
        try:
            posted = await self._client.chat_postMessage(
                channel=run.conversation.channel,
                thread_ts=run.conversation.thread,
                text=text,
                blocks=grant_used_blocks(text, grant.id),
            )
        except (SlackApiError, SlackObjectFormationError, ClientError, TimeoutError):
            # The audit trail has the `grant_used` entry; the run goes on without the line.
            log.warning("run %s: grant line not posted", run.run_id, exc_info=True)
            return
        try:
            channel = str(posted.get("channel") or run.conversation.channel)
            await self._store.note_line(grant.id, grant.ends_at, channel, str(posted["ts"]))
        except RedisError:
            log.warning("run %s: grant line not noted; a revoke leaves it as it is", run.run_id)


class DirectoryMembership:
    """`runtime.grants.check.Membership` from the approver directory (cached group members)."""

    def __init__(self, directory: ApproverDirectory) -> None:
        self._directory = directory

    async def members(self, group_id: str) -> set[str]:
        try:
            return await self._directory.members(group_id)
        except DirectoryUnavailable as error:
            raise MembershipUnavailable(group_id) from error
