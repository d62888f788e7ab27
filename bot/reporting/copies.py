"""Cards beyond the thread, through the Slack Web API: copies in direct messages and other
channels, and the word in the thread that a call was escalated (the runtime's `Reach`).

A copy is the card itself (the same buttons, the same approval) with a line saying where the
request lives; a person gets it in a direct message with the app (`conversations.open`), a user
group's members each get one, a channel gets it as a message.
"""

from __future__ import annotations

import logging

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError, SlackObjectFormationError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.cards import approval_decided_blocks, approval_request_blocks
from bot.blocks.parts import Block, context_block
from bot.slack.directory import ApproverDirectory, DirectoryUnavailable
from bot.slack.links import ThreadLinks
from bot.words import messages_tab as tab_words
from bot.words import overviews as words
from bot.words import runs as messages
from runtime.deciders import is_group, may_approve
from runtime.record import CardCopy, PendingCall
from runtime.reporter import RunView

log = logging.getLogger(__name__)

MAX_GROUP_COPIES = 50
"""Members of one user group who get a direct message each; a bigger group, notify a channel."""
SLACK_ERRORS = (SlackApiError, SlackObjectFormationError, ClientError, TimeoutError)
"""A Slack call that failed: refused by Slack, refused before sending as past its limits
(`slack_sdk`'s models), or Slack unreachable."""


class SlackReach:
    def __init__(
        self, client: AsyncWebClient, directory: ApproverDirectory, *, self_approval: bool = False
    ) -> None:
        """`self_approval`: `ALLOW_SELF_APPROVAL`, so a card lists its requester among those
        who may approve."""
        self._client = client
        self._directory = directory
        self._links = ThreadLinks(client)
        self._self_approval = self_approval

    def approvers_shown(self, run: RunView, call: PendingCall) -> list[str]:
        """Who may approve `call` (people and groups, mentioned so that Slack draws them): its
        approvers but the requester (who may only reject their own call, unless self-approval
        is allowed)."""
        requester = run.conversation.requester
        return list(may_approve(call.approvers, requester=requester, self_ok=self._self_approval))

    async def copy_card(
        self, run: RunView, call: PendingCall, targets: tuple[str, ...]
    ) -> tuple[CardCopy, ...]:
        blocks = await self._blocks(run, call)
        copies = []
        for channel in await self._channels(run, call, targets):
            try:
                response = await self._client.chat_postMessage(
                    channel=channel,
                    text=messages.approval_fallback(call.agent, call.tool),
                    blocks=blocks,
                    unfurl_links=False,
                    unfurl_media=False,
                )
            except SLACK_ERRORS as error:
                log.warning("run %s: no copy in %s: %s", run.run_id, channel, _why(error))
                continue
            copies.append(CardCopy(channel=str(response["channel"]), ts=str(response["ts"])))
        return tuple(copies)

    async def redraw_copies(self, run: RunView, call: PendingCall) -> None:
        if not call.copies:
            return
        blocks = await self._blocks(run, call)
        for copy in call.copies:
            try:
                await self._client.chat_update(
                    channel=copy.channel,
                    ts=copy.ts,
                    text=messages.approval_fallback(call.agent, call.tool)
                    if call.decision is None
                    else messages.decision_headline(
                        call.decision, call.tool, requester=run.conversation.requester
                    ),
                    blocks=blocks,
                )
            except SLACK_ERRORS as error:
                log.warning(
                    "run %s: copy in %s not redrawn: %s", run.run_id, copy.channel, _why(error)
                )

    async def escalated(self, run: RunView, call: PendingCall, targets: tuple[str, ...]) -> None:
        card_channel = run.card_channel(call)
        elsewhere = card_channel != run.conversation.channel
        await self._client.chat_postMessage(
            channel=card_channel,
            # Where the card is: under it, for a run asked for in a direct message.
            thread_ts=call.message_ts if elsewhere else run.conversation.thread,
            text=words.escalated(targets, call.tool, call.expires_at),
        )
        if call.message_ts is not None:
            approvers = self.approvers_shown(run, call)
            channel_name = await self._directory.channel_name(card_channel)
            blocks = approval_request_blocks(run, call, approvers, channel_name)
            if elsewhere:  # as posted: with the way back to where it was asked
                back = await self._links.thread(run.conversation.channel, run.conversation.thread)
                note = tab_words.asked_in_direct_message(run.conversation.requester, back)
                blocks = [*blocks, context_block(note)]
            try:
                await self._client.chat_update(
                    channel=card_channel,
                    ts=call.message_ts,
                    text=messages.approval_fallback(call.agent, call.tool),
                    blocks=blocks,
                )
            except SLACK_ERRORS as error:
                log.warning("run %s: card not redrawn: %s", run.run_id, _why(error))
        await self.redraw_copies(run, call)

    async def _blocks(self, run: RunView, call: PendingCall) -> list[Block]:
        approvers = self.approvers_shown(run, call)
        channel_name = await self._directory.channel_name(run.conversation.channel)
        blocks = (
            approval_request_blocks(run, call, approvers, channel_name)
            if call.decision is None
            else approval_decided_blocks(run, call)
        )
        channel = run.conversation.channel
        link = await self._links.thread(channel, run.conversation.thread)
        note = (
            words.copy_note(channel, link)
            if call.decision is None
            else words.copy_settled_note(channel, link, call.decision, run.conversation.requester)
        )
        return [*blocks, context_block(note)]

    async def _channels(
        self, run: RunView, call: PendingCall, targets: tuple[str, ...]
    ) -> list[str]:
        """Where the copies go: each channel named, and a direct message per person (the
        members of each group named), never the run's own channel or its requester."""
        people: list[str] = []
        channels: list[str] = []
        for target in targets:
            if target.startswith(("C", "G")):
                channels.append(target)
            elif is_group(target):
                try:
                    people += sorted(await self._directory.members(target))[:MAX_GROUP_COPIES]
                except DirectoryUnavailable:
                    log.warning("run %s: members of %s unknown; no copies", run.run_id, target)
            else:
                people.append(target)
        for person in dict.fromkeys(people):
            if person == run.conversation.requester:
                continue
            try:
                response = await self._client.conversations_open(users=person)
            except SLACK_ERRORS as error:
                log.warning(
                    "run %s: no direct message with %s: %s", run.run_id, person, _why(error)
                )
                continue
            channels.append(str(response["channel"]["id"]))
        own = (run.conversation.channel, run.card_channel(call))
        return [c for c in dict.fromkeys(channels) if c not in own]


def _why(error: Exception) -> str:
    if isinstance(error, SlackApiError):
        return str(error.response.get("error"))
    return type(error).__name__
