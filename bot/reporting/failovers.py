"""A decision lost in a Redis failover, said in Slack: the runtime's `LostDecisionReport`.

The card comes back as the new primary has the call (its buttons, the approvals that remain)
with a line naming whose decision was lost, or, when the call is not there at all, says it no
longer counts; the person who decided is told privately (a direct message when they decided on
the Home tab). See `runtime.failover.decisions` for how a loss is found.
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.cards import approval_decided_blocks, approval_request_blocks
from bot.blocks.parts import Block, context_block, section
from bot.reporting.copies import SLACK_ERRORS, SlackReach
from bot.slack.directory import ApproverDirectory
from bot.words import failovers as words
from bot.words import runs as messages
from runtime.failover import Acknowledged, LostDecision
from runtime.record import HOME_TAB, PendingCall
from runtime.reporter import RunView

log = logging.getLogger(__name__)


class SlackLostDecisions:
    def __init__(
        self, client: AsyncWebClient, directory: ApproverDirectory, reach: SlackReach
    ) -> None:
        self._client = client
        self._directory = directory
        self._reach = reach

    async def decision_lost(self, lost: LostDecision) -> None:
        decision, run, call = lost.decision, lost.run, lost.call
        try:
            if run is not None and call is not None:
                await self._reopen(run, call, decision)
            else:
                await self._void(run, decision)
        except SLACK_ERRORS as error:
            log.warning(
                "run %s: the card of a lost decision not redrawn: %s", decision.run_id, error
            )
        if call is not None:
            note = words.lost_note(decision.tool, decision.outcome)
        else:
            note = words.void_note(decision.tool, decision.outcome)
        thread = run.conversation.thread if run is not None else None
        try:
            if decision.where == HOME_TAB:
                await self._client.chat_postMessage(channel=decision.user_id, text=note)
            elif decision.where:
                await self._client.chat_postEphemeral(
                    channel=decision.where, user=decision.user_id, text=note, thread_ts=thread
                )
        except SLACK_ERRORS as error:
            log.warning(
                "run %s: the person of a lost decision not told: %s", decision.run_id, error
            )

    async def _reopen(self, run: RunView, call: PendingCall, decision: Acknowledged) -> None:
        """The card with its buttons again, and the line; any copies as the call stands."""
        approvers = self._reach.approvers_shown(run, call)
        channel = run.card_channel(call)
        channel_name = await self._directory.channel_name(channel)
        blocks = approval_request_blocks(run, call, approvers, channel_name)
        blocks.insert(1, context_block(words.lost_line(decision.user_id, decision.outcome)))
        text = messages.approval_fallback(call.agent, call.tool)
        shown = {call.message_ts}
        if decision.where == channel and decision.card_ts is not None:
            shown.add(decision.card_ts)  # the card clicked, if the record knows another
        for ts in sorted(t for t in shown if t):
            await self._update_or_post(run, channel, ts, text, blocks)
        if not any(shown):
            await self._update_or_post(run, channel, None, text, blocks)
        await self._reach.redraw_copies(run, call)

    async def _void(self, run: RunView | None, decision: Acknowledged) -> None:
        # Where the click was (the card's channel, or a copy's), else the run's.
        where = decision.where if decision.where and decision.where != HOME_TAB else None
        channel = where or (run.conversation.channel if run is not None else decision.where)
        if decision.card_ts is None or not channel or channel == HOME_TAB:
            return  # no card known to this process
        line = words.void_line(decision.user_id, decision.outcome)
        await self._client.chat_update(
            channel=channel, ts=decision.card_ts, text=line, blocks=[section(line)]
        )

    async def _update_or_post(
        self, run: RunView, channel: str, ts: str | None, text: str, blocks: list[Block]
    ) -> None:
        """Update the card, or post it in the thread (in the approvers' channel: there) when
        Slack no longer has it."""
        if ts is not None:
            try:
                await self._client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
                return
            except SlackApiError as error:
                if error.response.get("error") != "message_not_found":
                    raise
        await self._client.chat_postMessage(
            channel=channel,
            thread_ts=run.conversation.thread if channel == run.conversation.channel else None,
            text=text,
            blocks=blocks,
        )


async def redraw_clicked(
    client: AsyncWebClient, run: RunView, call: PendingCall, message_ts: str | None
) -> None:
    """A decided call's card drawn on `message_ts` too, a second card of the call in its thread
    (its first message's id was lost with a primary, and a retried job posted the card again).
    Only updated: a message deleted meanwhile is not posted again."""
    if call.decision is None or message_ts is None:
        return  # an open card is drawn where the record says (a quorum's count)
    await client.chat_update(
        channel=run.card_channel(call),
        ts=message_ts,
        text=messages.decision_headline(call.decision, call.tool),
        blocks=approval_decided_blocks(run, call),
    )
