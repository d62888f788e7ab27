"""Cards of runs asked for in a direct message with the app (its Messages tab): posted in the
approvers' channel (`PendingCall.channel`: a rule's `channel`, else `APPROVAL_CHANNEL`), each
with the way back to the requester's thread; the thread says the call waits there, with a link
to the card. Who may decide, the digest and the audit are the card's as anywhere else: the
decision script's gate names this channel, so a click counts only here (or on a copy, or the
Home tab)."""

from __future__ import annotations

import logging
from collections import OrderedDict

from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.parts import Block, context_block
from bot.reporting.copies import SLACK_ERRORS
from bot.slack.links import ThreadLinks
from bot.words import messages_tab as words
from bot.words import runs as messages
from runtime.record import PendingCall
from runtime.reporter import RunView

log = logging.getLogger(__name__)

REMEMBERED_CARDS = 1024
"""Cards posted by this process whose channel is remembered, in case one is taken back."""


class ApproversChannel:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._links = ThreadLinks(client)
        self._posted: OrderedDict[str, str] = OrderedDict()

    def channel_of(self, ts: str) -> str | None:
        """The channel of a card this process posted there (None: not one of those)."""
        return self._posted.get(ts)

    async def post(self, run: RunView, call: PendingCall, channel: str, blocks: list[Block]) -> str:
        """The card in `channel`, then the pointer to it in the requester's thread; its ts."""
        response = await self._client.chat_postMessage(
            channel=channel,
            text=messages.approval_fallback(call.agent, call.tool),
            blocks=await self.with_way_back(run, call, blocks),
            unfurl_links=False,
            unfurl_media=False,
        )
        ts = str(response["ts"])
        self._posted[ts] = channel
        while len(self._posted) > REMEMBERED_CARDS:
            self._posted.popitem(last=False)
        card = await self._links.thread(channel, ts)
        try:
            await self._client.chat_postMessage(
                channel=run.conversation.channel,
                thread_ts=run.conversation.thread,
                text=words.waiting_in_channel(call.tool, channel, card),
                unfurl_links=False,
                unfurl_media=False,
            )
        except SLACK_ERRORS as error:  # the card is what counts; the pointer is a courtesy
            log.warning("run %s: the card's pointer not posted: %s", run.run_id, error)
        return ts

    async def with_way_back(
        self, run: RunView, call: PendingCall, blocks: list[Block]
    ) -> list[Block]:
        """`blocks`, and for a card in the approvers' channel where it was asked, with a link
        back there."""
        if run.card_channel(call) == run.conversation.channel:
            return blocks
        conversation = run.conversation
        back = await self._links.thread(conversation.channel, conversation.thread)
        note = words.asked_in_direct_message(conversation.requester, back)
        return [*blocks, context_block(note)]
