"""The runtime's `Reporter`, spoken through the Slack Web API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace

from aiohttp import ClientError
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError, SlackObjectFormationError
from slack_sdk.models.blocks import MarkdownBlock
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.cards import approval_decided_blocks, approval_request_blocks
from bot.blocks.parts import Block
from bot.blocks.status import status_blocks, status_text, stream_foot
from bot.reporting.approvers_channel import ApproversChannel
from bot.reporting.card_draws import CardDraws
from bot.reporting.copies import SLACK_ERRORS, SlackReach
from bot.reporting.reminder_lines import ReminderLines
from bot.reporting.sessions import AgentSessions
from bot.reporting.streams import STREAM_PREFIX, RunStreams, plain
from bot.slack.bot_token import REFUSED
from bot.slack.client import response_url
from bot.slack.directory import ApproverDirectory
from bot.words import choices as choice_messages
from bot.words import overviews as reach_messages
from bot.words import runs as messages
from bot.words import streams as stream_words
from runtime.deciders import is_group
from runtime.record import PendingCall
from runtime.reporter import Activity, ConversationUnavailable, Failure, RunView

log = logging.getLogger(__name__)

# Errors that mean the bot cannot talk in the channel at all: retrying will not help.
UNREACHABLE_CHANNEL_ERRORS = frozenset(
    {"not_in_channel", "channel_not_found", "is_archived", "restricted_action"}
)
WARM_SECONDS = 5.0
"""How long a card may wait for its approver groups to be looked up ahead of the clicks."""


class SlackReporter:
    def __init__(
        self,
        client: AsyncWebClient,
        directory: ApproverDirectory,
        reach: SlackReach | None = None,
        reminder_lines: ReminderLines | None = None,
        draws: CardDraws | None = None,
        sessions: AgentSessions | None = None,
    ) -> None:
        """`reminder_lines`: where reminders are noted, so that they stop saying a call waits
        once it is settled (None: they are left as posted). `draws`: where decided cards are
        noted as drawn, so that a redraw by the other process comes after (None: no waiting)."""
        self._client = client
        self._directory = directory
        self._reach = reach or SlackReach(client, directory)
        self._reminder_lines = reminder_lines
        self._draws = draws
        self.sessions = sessions or AgentSessions(client, enabled=False)
        """The run's thread as a Slack agent session (`bot.reporting.sessions`)."""
        self._streams = RunStreams(client, self.sessions, directory)
        self._approvers = ApproversChannel(client)
        """Cards of runs asked for in a direct message (`bot.reporting.approvers_channel`)."""

    async def run_started(self, run: RunView) -> str:
        conversation = run.conversation
        try:
            response = await self._client.chat_postMessage(
                channel=conversation.channel,
                # A person's own message opened the thread (a direct message): answered in it.
                thread_ts=conversation.opened,
                text=messages.root_message(conversation.requester, run.agent, run.task),
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as error:
            if error.response.get("error") not in UNREACHABLE_CHANNEL_ERRORS:
                raise
            await self._tell_requester(run, messages.cannot_post(conversation.channel))
            raise ConversationUnavailable(str(error.response.get("error"))) from error
        thread = conversation.opened or str(response["ts"])
        await self.sessions.begin(
            replace(run, conversation=conversation.model_copy(update={"thread": thread}))
        )
        return thread

    async def _tell_requester(self, run: RunView, text: str) -> None:
        url = run.conversation.reply_url
        if not url:
            return
        try:
            await response_url(url, self._client).send(
                text=text, response_type="ephemeral", replace_original=False
            )
        except (ClientError, TimeoutError):
            log.warning("run %s: could not reach the requester either", run.run_id)

    async def working(self, run: RunView) -> None:
        await self.sessions.show(run, "working")

    def shows_text(self, run: RunView) -> bool:
        return self.sessions.on_for(run)

    async def progress(self, run: RunView, message_id: str | None, activity: Activity) -> str:
        activity = _as_shown(run, activity)
        # The status message (streamed, or drawn) first: it is what people rely on; the
        # session follows it.
        text = status_text(activity)
        foot = stream_foot(run.run_id, text, activity)
        kept, streamed = await self._streams.show(run, message_id, activity, foot)
        if streamed and kept is not None:
            shown = kept
        else:
            shown = await self._status_message(run, kept, activity)
        if not (streamed and shown.startswith(STREAM_PREFIX) and activity.state != "working"):
            # A stream left open for the cards sets the session's status once it is stopped:
            # a stop after it would take the status back to `active`.
            await self.sessions.show(run, activity.state)
        return shown

    async def cards_posted(self, run: RunView, message_id: str, activity: Activity) -> str:
        activity = _as_shown(run, activity)
        text = status_text(activity)
        foot = stream_foot(run.run_id, text, activity)
        kept, streamed = await self._streams.cards_posted(run, activity, foot)
        if kept is None:
            return message_id  # nothing was left open: the status stands as drawn
        shown = kept if streamed else await self._status_message(run, kept, activity)
        await self.sessions.show(run, activity.state)
        return shown

    async def _status_message(
        self, run: RunView, message_id: str | None, activity: Activity
    ) -> str:
        text = status_text(activity)
        blocks = status_blocks(run.run_id, text, activity.state, batch=activity.batchable)
        if activity.text.strip():  # a stream that went on as this message: its text stays
            blocks.insert(0, MarkdownBlock(text=stream_words.said_so_far(activity.text)))
        try:
            return await self._update_or_post(run, message_id, text, blocks, "its status message")
        except SlackApiError as error:
            if error.response.get("error") in REFUSED:
                raise  # the token, not the message: the run waits for it (`runtime.jobs`)
            log.warning("run %s: status message not updated", run.run_id, exc_info=True)
            return message_id or ""
        except (ClientError, TimeoutError, SlackObjectFormationError):
            # The status message is a courtesy; the run goes on without it.
            log.warning("run %s: status message not updated", run.run_id, exc_info=True)
            return message_id or ""

    async def approval_requested(self, run: RunView, call: PendingCall) -> str:
        await self._warm(run, call)
        channel = run.card_channel(call)
        blocks = approval_request_blocks(
            run,
            call,
            self._reach.approvers_shown(run, call),
            await self._directory.channel_name(channel),
        )
        if channel == run.conversation.channel:
            response = await self._client.chat_postMessage(
                channel=channel,
                thread_ts=run.conversation.thread,
                text=messages.approval_fallback(call.agent, call.tool),
                blocks=blocks,
            )
            return str(response["ts"])
        return await self._approvers.post(run, call, channel, blocks)

    async def retract(self, run: RunView, message_id: str) -> None:
        if message_id == run.conversation.opened:
            return  # the person's own message, which opened the run's thread: never ours to take
        try:
            await self._client.chat_delete(
                channel=self._approvers.channel_of(message_id) or run.conversation.channel,
                ts=plain(message_id) or message_id,
            )
            return
        except SlackApiError as error:
            reason = str(error.response.get("error"))
            if reason == "message_not_found":
                return
        except (ClientError, TimeoutError) as error:
            reason = type(error).__name__
        log.warning(
            "run %s: a message posted twice could not be taken back (%s)", run.run_id, reason
        )

    async def _warm(self, run: RunView, call: PendingCall) -> None:
        """Look the approver groups' members up before anyone can click, so that clicks (which
        Slack gives 3 s) find them cached. A courtesy: failing here only costs the clicks a
        lookup of their own."""
        try:
            async with asyncio.timeout(WARM_SECONDS):
                await self._directory.warm(call.approvers)
        except (RedisError, TimeoutError):
            log.warning("run %s: approver groups not looked up ahead", run.run_id, exc_info=True)

    async def approval_expired(self, run: RunView, call: PendingCall) -> str | None:
        if call.message_ts is None:
            return None  # the card was never posted; nothing to update
        return await self.redraw(run, call)

    async def redraw(self, run: RunView, call: PendingCall) -> str | None:
        """Redraw a card: once decided, who decided, when and why, and no buttons; while open,
        the approvals counted so far.

        When Slack no longer has the card's message (`message_not_found`: deleted, or a console
        restarted without it), the card is posted again in the thread; returns the new
        message's ts then, so it can be stored, else None.
        """
        assert call.message_ts is not None
        if call.decision is None:
            approvers = self._reach.approvers_shown(run, call)
            channel_name = await self._directory.channel_name(run.card_channel(call))
            blocks = approval_request_blocks(run, call, approvers, channel_name)
            text = messages.approval_fallback(call.agent, call.tool)
        else:
            blocks = approval_decided_blocks(run, call)
            text = messages.decision_headline(
                call.decision, call.tool, requester=run.conversation.requester
            )
        card = f"the card of {call.tool} (approval {call.approval_id})"
        blocks = await self._approvers.with_way_back(run, call, blocks)
        ts = await self._update_or_post(
            run, call.message_ts, text, blocks, card, channel=run.card_channel(call)
        )
        await self._settle_reminders(run, call)
        await self._reach.redraw_copies(run, call)
        # Only an edited call's card is drawn again by the worker (with the edit's preview).
        if call.decision is not None and call.decision.edit is not None and self._draws is not None:
            await self._draws.drawn(run.run_id, call.approval_id)
        return ts if ts != call.message_ts else None

    async def _update_or_post(
        self,
        run: RunView,
        message_ts: str | None,
        text: str,
        blocks: list[Block],
        what: str,
        *,
        channel: str | None = None,
    ) -> str:
        """Update the message at `message_ts`, or post it in the run's thread when there is
        none or Slack no longer has it (`message_not_found`): the ts it has now. `channel`: a
        card's, in the approvers' channel (posted again there, not in a thread)."""
        channel = channel or run.conversation.channel
        if message_ts:
            try:
                await self._client.chat_update(
                    channel=channel, ts=message_ts, text=text, blocks=blocks
                )
                return message_ts
            except SlackApiError as error:
                if error.response.get("error") != "message_not_found":
                    raise
            log.warning(
                "run %s: %s is gone from Slack (message_not_found); posting it again in the thread",
                run.run_id,
                what,
            )
        response = await self._client.chat_postMessage(
            channel=channel,
            thread_ts=run.conversation.thread if channel == run.conversation.channel else None,
            text=text,
            blocks=blocks,
        )
        return str(response["ts"])

    async def approval_reminder(self, run: RunView, call: PendingCall) -> None:
        # Mentions notify: the approvers (a group mention reaches all its members); nobody when
        # anyone in the channel may decide (the requester may not approve their own run).
        mentions = [f"<!subteam^{p}>" if is_group(p) else messages.user(p) for p in call.approvers]
        text = (
            messages.reminder(mentions, call.agent, call.tool, call.expires_at)
            if mentions
            else reach_messages.reminder_anyone(call.agent, call.tool, call.expires_at)
        )
        channel = run.card_channel(call)
        # Where the card is: under it in the approvers' channel, for a run asked for elsewhere.
        thread = run.conversation.thread if channel == run.conversation.channel else call.message_ts
        posted = await self._client.chat_postMessage(channel=channel, thread_ts=thread, text=text)
        if self._reminder_lines is not None:
            try:
                await self._reminder_lines.note(run.run_id, call.approval_id, str(posted["ts"]))
            except RedisError:
                log.warning("run %s: reminder not noted; it stays as posted", run.run_id)

    async def _settle_reminders(self, run: RunView, call: PendingCall) -> None:
        """The call's reminders stop saying it waits (best effort: the card says it first)."""
        if self._reminder_lines is None or call.decision is None:
            return
        try:
            lines = await self._reminder_lines.take(run.run_id, call.approval_id)
        except RedisError:
            log.warning("run %s: reminders not redrawn (Redis unreachable)", run.run_id)
            return
        text = messages.reminder_settled(call.tool, call.decision)
        for ts in lines:
            try:
                await self._client.chat_update(channel=run.card_channel(call), ts=ts, text=text)
            except (SlackApiError, ClientError, TimeoutError) as error:
                log.warning("run %s: a reminder not redrawn (%s)", run.run_id, error)

    async def call_refused(self, run: RunView, call: PendingCall) -> None:
        await self._client.chat_postMessage(
            channel=run.conversation.channel,
            thread_ts=run.conversation.thread,
            text=messages.call_refused(call.tool, call.digest),
        )

    async def edit_previewed(self, run: RunView, call: PendingCall) -> None:
        # The card first, once the web has drawn the decision on it (else that drawing could
        # land last and hide the preview); the thread's line stays whatever happens to the card.
        if call.message_ts is not None and call.decision is not None:
            if self._draws is not None:
                await self._draws.wait_drawn(run.run_id, call.approval_id)
                await self._draws.forget(run.run_id, call.approval_id)
            blocks = await self._approvers.with_way_back(
                run, call, approval_decided_blocks(run, call)
            )
            text = messages.decision_headline(
                call.decision, call.tool, requester=run.conversation.requester
            )
            try:
                await self._client.chat_update(
                    channel=run.card_channel(call), ts=call.message_ts, text=text, blocks=blocks
                )
            except SLACK_ERRORS as error:
                log.warning(
                    "run %s: card not redrawn with the edit's preview: %s", run.run_id, error
                )
            await self._reach.redraw_copies(run, call)
        edit = call.decision.edit if call.decision else None
        try:
            await self._client.chat_postMessage(
                channel=run.conversation.channel,
                thread_ts=run.conversation.thread,
                text=choice_messages.edited_preview_line(
                    call.tool, edit.user_id if edit else None, call.edited_preview or ""
                ),
            )
        except SLACK_ERRORS as error:
            log.warning("run %s: the edit's preview not posted: %s", run.run_id, error)

    async def run_finished(self, run: RunView, output: str) -> None:
        await self._client.chat_postMessage(
            channel=run.conversation.channel,
            thread_ts=run.conversation.thread,
            text=messages.final_answer(output),
        )
        await self.sessions.show(run, "done")

    async def run_stopped(self, run: RunView, user_id: str) -> None:
        await self._client.chat_postMessage(
            channel=run.conversation.channel,
            thread_ts=run.conversation.thread,
            text=messages.run_stopped(user_id),
        )
        await self.sessions.show(run, "stopped")

    async def run_failed(
        self, run: RunView, failure: Failure, detail: str, ran: Sequence[str] = ()
    ) -> None:
        text = messages.run_failed(run.run_id, failure, detail, ran)
        if run.conversation.thread is None:
            await self._tell_requester(run, text)
            return
        await self._client.chat_postMessage(
            channel=run.conversation.channel, thread_ts=run.conversation.thread, text=text
        )
        # However the run ended (a job that gave up, a record no version can read), its session
        # says so: never `processing` once nothing works on it.
        await self.sessions.show(run, "failed")


def _as_shown(run: RunView, activity: Activity) -> Activity:
    if run.conversation.direct and activity.batchable:
        # Its cards are in the approvers' channel; a decision counts only from there.
        return replace(activity, batchable=False)
    return activity
