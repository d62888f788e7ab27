"""Clicks on approval cards and the reject modal.

Bolt runs these with `process_before_response`, so the HTTP acknowledgement leaves only after the
listener returns: by then the decision is in Redis. What Slack shows afterwards (the updated
card, an ephemeral note, a modal) is sent from owned background tasks that shutdown drains.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.cards import (
    ACTION_APPROVE_ALWAYS,
    REASON_ACTION,
    REASON_BLOCK,
    arguments_modal,
    reject_modal,
)
from bot.listeners.acknowledged import note_acknowledged
from bot.listeners.gate import ApprovalGate, GateAnswer
from bot.reporting.failovers import redraw_clicked
from bot.reporting.reporter import SlackReporter
from bot.slack.client import open_modal, send_later
from bot.slack.payloads import ApprovalRef, ButtonClick, RejectMetadata, SlackUser, ViewSubmission
from bot.words import runs as messages
from runtime.decisions import CallView, Choice, DecisionRecorder
from runtime.failover import AcknowledgedDecisions
from runtime.process import TaskSet, bind_log_context
from runtime.record import Decision, PendingCall
from runtime.reporter import RunView

log = logging.getLogger(__name__)

M = TypeVar("M", bound=RejectMetadata)


async def full_arguments(recorder: DecisionRecorder, ref: ApprovalRef) -> PendingCall | str:
    """The call whose arguments **View full arguments** shows (on a card or in the Home tab),
    or what to tell the clicker instead."""
    try:
        view = await recorder.view(ref.run_id, ref.approval_id)
    except RedisError:
        return messages.TRY_AGAIN
    if view.call is None:
        return messages.OTHER_VERSION if view.exists and view.gate else messages.APPROVAL_UNKNOWN
    return view.call


def card_metadata(kind: type[M], click: ButtonClick, view: CallView) -> M:
    """What a modal opened from a card's button carries to its submission: the call, the card
    clicked, and the digest of the call as the button showed it."""
    return kind(
        run_id=view.run_id,
        approval_id=view.approval_id,
        channel=click.channel.id,
        message_ts=click.container.message_ts,
        digest=ApprovalRef.parse(click.action.value).digest,
    )


@dataclass(kw_only=True)
class ApprovalActions:
    recorder: DecisionRecorder
    client: AsyncWebClient
    reporter: SlackReporter
    gate: ApprovalGate
    tasks: TaskSet
    acknowledged: AcknowledgedDecisions | None = None
    """Decisions told to people, looked for again after a Redis failover."""

    # --- listeners ------------------------------------------------------------------------

    async def on_approve(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = self._parse_click(body)
        if click is None:
            return
        ref = ApprovalRef.parse(click.action.value)
        always = click.action.action_id == ACTION_APPROVE_ALWAYS
        choice = Choice(
            outcome="approved_always" if always else "approved",
            user_id=click.user.id,
            user_name=click.user.display,
        )
        await self._decide(ref, choice, click.user, click.channel.id, click.container.message_ts)

    async def on_reject(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Open the reason modal, after the same checks as a decision (recording nothing)."""
        await ack()
        decidable = await self.decidable(body)
        if decidable is None:
            return
        click, view, call = decidable
        metadata = card_metadata(RejectMetadata, click, view)
        requester = view.gate.requester if view.gate else None
        modal = reject_modal(call, metadata.model_dump_json(), requester)
        open_modal(self.tasks, self.client, click.trigger_id, modal, "reject-modal")

    async def on_view_arguments(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = self._parse_click(body)
        if click is None:
            return
        found = await full_arguments(self.recorder, ApprovalRef.parse(click.action.value))
        if isinstance(found, str):
            self._ephemeral(click.channel.id, click.user.id, None, found)
            return
        modal = arguments_modal(found)
        open_modal(self.tasks, self.client, click.trigger_id, modal, "args-modal")

    async def on_reject_submitted(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        parsed = ViewSubmission.with_metadata(body, RejectMetadata)
        if parsed is None:
            log.warning("reject submission with an invalid payload refused")
            await ack()
            return
        submission, meta = parsed
        reason = submission.text_input(REASON_BLOCK, REASON_ACTION).strip()
        if not reason:
            await ack(
                response_action="errors", errors={REASON_BLOCK: messages.REJECT_REASON_REQUIRED}
            )
            return
        await ack()
        choice = Choice(
            outcome="rejected",
            user_id=submission.user.id,
            user_name=submission.user.display,
            reason=reason[:2000],
        )
        ref = ApprovalRef(run_id=meta.run_id, approval_id=meta.approval_id, digest=meta.digest)
        await self._decide(ref, choice, submission.user, meta.channel, meta.message_ts)

    # --- for the grant and edit actions (bot/listeners/grants.py, bot/listeners/edits.py)

    async def record(
        self, ref: ApprovalRef, choice: Choice, actor: SlackUser, channel: str, ts: str | None
    ) -> None:
        """Record a choice made some other way than the card's buttons, exactly like a click."""
        await self._decide(ref, choice, actor, channel, ts)

    async def may_decide(self, click: ButtonClick) -> CallView | None:
        """The call a click is about, if the clicker may decide it now (recording nothing);
        otherwise None, and the clicker has been told why."""
        ref = ApprovalRef.parse(click.action.value)
        answer = await self.gate.check(
            ref, click.user.id, click.channel.id, claimed_team=click.user.team_id
        )
        if not answer.may_decide or answer.view is None:
            self._explain(answer, click.user, click.channel.id)
            return None
        return answer.view

    async def decidable(
        self, body: dict[str, Any]
    ) -> tuple[ButtonClick, CallView, PendingCall] | None:
        """The click in `body` and the call it is about, if the clicker may decide it now
        (recording nothing): for a listener that opens a modal first. Otherwise None, and the
        clicker has been told why."""
        click = self._parse_click(body)
        if click is None:
            return None
        view = await self.may_decide(click)
        if view is None or view.call is None:
            return None
        return click, view, view.call

    def tell(self, channel: str, user: str, thread: str | None, text: str) -> None:
        """A private note to one person, sent after the acknowledgement."""
        self._ephemeral(channel, user, thread, text)

    # --- the decision ------------------------------------------------------------------------

    async def _decide(
        self,
        ref: ApprovalRef,
        choice: Choice,
        actor: SlackUser,
        channel: str,
        message_ts: str | None,
    ) -> None:
        answer = await self.ask(ref, choice, actor, channel, message_ts)
        self.follow_up(answer, ref, choice, actor, channel, message_ts)

    async def ask(
        self,
        ref: ApprovalRef,
        choice: Choice,
        actor: SlackUser,
        channel: str,
        message_ts: str | None,
    ) -> GateAnswer:
        """Record `choice` through the decision script, with nothing shown yet (see
        `follow_up`): for a listener that answers its modal from the outcome."""
        bind_log_context(run_id=ref.run_id, approval_id=ref.approval_id, event=choice.outcome)
        return await self.gate.decide(
            ref, choice, channel, message_ts=message_ts, claimed_team=actor.team_id
        )

    def follow_up(
        self,
        answer: GateAnswer,
        ref: ApprovalRef,
        choice: Choice,
        actor: SlackUser,
        channel: str,
        message_ts: str | None,
    ) -> None:
        """What people see after a choice: the card redrawn, or the person told why not."""
        if answer.took_effect:
            log.info("run %s: %s %s by %s", ref.run_id, ref.approval_id, choice.outcome, actor.id)
            note_acknowledged(self.acknowledged, answer, choice, where=channel, card_ts=message_ts)
            self._redraw(answer, message_ts, channel)
            for approval_id, decision in answer.result.covered if answer.result else ():
                work = self._redraw_covered(ref.run_id, approval_id, decision)
                send_later(self.tasks, work, f"redraw:{approval_id}")
            send_later(self.tasks, self.gate.redraw_status(self.reporter, answer), "status")
            return
        self._explain(answer, actor, channel, message_ts)
        if answer.unconfirmed is not None:
            send_later(self.tasks, self._redraw_once_confirmed(answer, message_ts), "confirm")

    async def _redraw_once_confirmed(self, answer: GateAnswer, message_ts: str | None) -> None:
        """A choice the replicas confirm late counts (the worker acts on it): the card must
        then say so, whether or not the person clicks again."""
        confirmed = await self.gate.once_confirmed(answer)
        if confirmed is not None:
            self._redraw(confirmed, message_ts)

    def _explain(
        self, answer: GateAnswer, actor: SlackUser, channel: str, message_ts: str | None = None
    ) -> None:
        """Tell the clicker why nothing was recorded; redraw a card that still shows buttons."""
        result, view = answer.result, answer.view
        log.info("click by %s not recorded: %s", actor.id, result.status if result else "failed")
        if result is not None and view is not None and result.status in ("decided", "stale"):
            # A stale click's card is drawn anew: the call as it stands, with its digest.
            self._redraw(answer, message_ts, channel)
        # Naming the approvers may ask Slack: after the acknowledgement, not before.
        send_later(self.tasks, self._tell_why(answer, actor, channel), "refusal")

    async def _tell_why(self, answer: GateAnswer, actor: SlackUser, channel: str) -> None:
        text = await self.gate.explanation(answer)
        await self.client.chat_postEphemeral(
            channel=channel, user=actor.id, text=text, thread_ts=_thread(answer.view)
        )

    def _redraw(
        self, answer: GateAnswer, message_ts: str | None, channel: str | None = None
    ) -> None:
        """Show the decision on the card, or the approvals so far while a quorum is not met
        (`message_ts`, `channel`: the message clicked, where known)."""
        found = self.gate.card_after(answer, message_ts)
        if found is not None:
            run, call = found
            send_later(self.tasks, self.reporter.redraw(run, call), f"redraw:{call.approval_id}")
            if channel == run.card_channel(call) and message_ts not in (None, call.message_ts):
                # The card twice in its thread (the first one's id lost in a Redis failover, and
                # a retried job posted it again): the one clicked says it too.
                send_later(self.tasks, redraw_clicked(self.client, run, call, message_ts), "card")

    async def _redraw_covered(self, run_id: str, approval_id: str, decision: Decision) -> None:
        """The card of a call an Approve always approved beside the clicked one."""
        view = await self.recorder.view(run_id, approval_id)
        if view.envelope is None or view.call is None or view.call.message_ts is None:
            return
        call = view.call.model_copy(update={"decision": decision})
        await self.reporter.redraw(RunView.of(view.envelope), call)

    # --- plumbing ---------------------------------------------------------------------------

    def _parse_click(self, body: dict[str, Any]) -> ButtonClick | None:
        try:
            click = ButtonClick.model_validate(body)
            ApprovalRef.parse(click.action.value)
        except (ValidationError, ValueError):
            log.warning("button click with an invalid payload refused")
            self._ephemeral_raw(body, messages.BUTTON_INVALID)
            return None
        return click

    def _ephemeral_raw(self, body: dict[str, Any], text: str) -> None:
        """Answer a payload too broken to parse, if it names a channel and a user at all."""
        channel, user = _dig(body, "channel", "id"), _dig(body, "user", "id")
        if channel and user:
            self._ephemeral(channel, user, None, text)

    def _ephemeral(self, channel: str, user: str, thread: str | None, text: str) -> None:
        work = self.client.chat_postEphemeral(
            channel=channel, user=user, text=text, thread_ts=thread
        )
        send_later(self.tasks, work, "ephemeral")


def _thread(view: CallView | None) -> str | None:
    return view.envelope.conversation.thread if view and view.envelope else None


def _dig(body: object, *path: str) -> str | None:
    for key in path:
        body = body.get(key) if isinstance(body, dict) else None
    return body if isinstance(body, str) and len(body) < 64 else None
