"""Clicks on approval cards and the reject modal.

Bolt runs these with `process_before_response`, so the HTTP acknowledgement leaves only after the
listener returns: by then the decision is in Redis. What Slack shows afterwards (the updated
card, an ephemeral note, a modal) is sent from owned background tasks that shutdown drains.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientError
from pydantic import ValidationError
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import messages
from bot.approval_blocks import (
    ACTION_APPROVE_ALWAYS,
    REASON_ACTION,
    REASON_BLOCK,
    arguments_modal,
    reject_modal,
)
from bot.approval_gate import ApprovalGate
from bot.approvers import DirectoryUnavailable
from bot.payloads import ApprovalRef, ButtonClick, RejectMetadata, SlackUser, ViewSubmission
from bot.slack_reporter import SlackReporter
from runtime.decision_recorder import CallView, Choice, DecisionRecorder, RecordResult
from runtime.log_format import bind_log_context
from runtime.metrics import count_decision, count_denied
from runtime.reporter import RunView
from runtime.task_set import TaskSet

log = logging.getLogger(__name__)

NOT_RECORDED = {
    "expired": messages.APPROVAL_EXPIRED,
    "closed": messages.APPROVAL_CLOSED,
    "unknown": messages.APPROVAL_UNKNOWN,
    "gone": messages.APPROVAL_UNKNOWN,
}
REFUSED = frozenset({"not_allowed", "self", "not_offered", "unreadable"})


@dataclass(kw_only=True)
class ApprovalActions:
    recorder: DecisionRecorder
    client: AsyncWebClient
    reporter: SlackReporter
    gate: ApprovalGate
    tasks: TaskSet

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
        click = self._parse_click(body)
        if click is None:
            return
        ref = ApprovalRef.parse(click.action.value)
        channel, user = click.channel.id, click.user
        try:
            view = await self.recorder.view(ref.run_id, ref.approval_id)
            member_of = await self.gate.groups_of(user.id, view.gate)
            check = await self.recorder.check(view, user.id, channel=channel, member_of=member_of)
        except RedisError:
            self._ephemeral(channel, user.id, None, messages.TRY_AGAIN)
            return
        except DirectoryUnavailable:
            self._ephemeral(channel, user.id, _thread(view), messages.DIRECTORY_UNAVAILABLE)
            return
        if view.call is None or check.status not in ("open", "already_approved"):
            self._explain(check, user, channel, view)
            return
        metadata = RejectMetadata(
            run_id=ref.run_id,
            approval_id=ref.approval_id,
            channel=channel,
            message_ts=click.container.message_ts,
        )
        modal = reject_modal(view.call, metadata.model_dump_json())
        self._later(self.client.views_open(trigger_id=click.trigger_id, view=modal), "reject-modal")

    async def on_view_arguments(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = self._parse_click(body)
        if click is None:
            return
        ref = ApprovalRef.parse(click.action.value)
        try:
            view = await self.recorder.view(ref.run_id, ref.approval_id)
        except RedisError:
            self._ephemeral(click.channel.id, click.user.id, None, messages.TRY_AGAIN)
            return
        if view.call is None:
            text = (
                messages.OTHER_VERSION if view.exists and view.gate else messages.APPROVAL_UNKNOWN
            )
            self._ephemeral(click.channel.id, click.user.id, None, text)
            return
        modal = arguments_modal(view.call)
        self._later(self.client.views_open(trigger_id=click.trigger_id, view=modal), "args-modal")

    async def on_reject_submitted(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            submission = ViewSubmission.model_validate(body)
            meta = RejectMetadata.model_validate_json(submission.view.private_metadata)
        except ValidationError:
            log.warning("reject submission with an invalid payload refused")
            await ack()
            return
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
        ref = ApprovalRef(run_id=meta.run_id, approval_id=meta.approval_id)
        await self._decide(ref, choice, submission.user, meta.channel, meta.message_ts)

    # --- the decision ------------------------------------------------------------------------

    async def _decide(
        self,
        ref: ApprovalRef,
        choice: Choice,
        actor: SlackUser,
        channel: str,
        message_ts: str | None,
    ) -> None:
        view: CallView | None = None
        bind_log_context(run_id=ref.run_id, approval_id=ref.approval_id, event=choice.outcome)
        try:
            # Read before deciding: once the last decision is in, the worker may finish the run
            # and delete its record before the card is redrawn.
            view = await self.recorder.view(ref.run_id, ref.approval_id)
            member_of = await self.gate.groups_of(actor.id, view.gate)
            result = await self.recorder.decide(view, choice, channel=channel, member_of=member_of)
        except RedisError:
            log.warning("run %s: decision not recorded, Redis unreachable", ref.run_id)
            self._ephemeral(channel, actor.id, None, messages.TRY_AGAIN)
            return
        except DirectoryUnavailable:
            log.warning("run %s: decision not recorded, group members unknown", ref.run_id)
            self._ephemeral(channel, actor.id, _thread(view), messages.DIRECTORY_UNAVAILABLE)
            return
        if result.status == "recorded":
            count_decision(result.decision, card_ts=message_ts)
        if result.status == "recorded" or _is_own_retry(result, choice):
            log.info("run %s: %s %s by %s", ref.run_id, ref.approval_id, choice.outcome, actor.id)
            if result.decision is not None:
                self._redraw(view, result, message_ts)
            return
        if result.status == "counted":
            self._redraw(view, result, message_ts)
            return
        self._explain(result, actor, channel, view, message_ts)

    def _explain(
        self,
        result: RecordResult,
        actor: SlackUser,
        channel: str,
        view: CallView,
        message_ts: str | None = None,
    ) -> None:
        """Tell the clicker why nothing was recorded; redraw a card that still shows buttons."""
        log.info("click by %s not recorded: %s", actor.id, result.status)
        if result.status in ("not_allowed", "self"):
            count_denied()
        thread = _thread(view)
        if result.status in REFUSED:
            # Naming the approvers may ask Slack: after the acknowledgement, not before.
            self._later(self._refuse(result, actor, channel, view), "refusal")
            return
        if result.status == "already_approved" and view.call is not None:
            text = messages.already_approved(len(result.approvals), view.call.quorum)
        elif result.status == "decided" and result.decision is not None:
            text = messages.already_decided(result.decision)
            self._redraw(view, result, message_ts)
        else:
            text = NOT_RECORDED.get(result.status, messages.APPROVAL_UNKNOWN)
        self._ephemeral(channel, actor.id, thread, text)

    async def _refuse(
        self, result: RecordResult, actor: SlackUser, channel: str, view: CallView
    ) -> None:
        text = await self.gate.refusal(result.status, view.gate) or messages.APPROVAL_UNKNOWN
        await self.client.chat_postEphemeral(
            channel=channel, user=actor.id, text=text, thread_ts=_thread(view)
        )

    def _redraw(self, view: CallView, result: RecordResult, message_ts: str | None) -> None:
        """Show the decision on the card, or the approvals so far while a quorum is not met."""
        if view.envelope is None or view.call is None:
            log.warning("run %s: card not redrawn (record unreadable here)", view.run_id)
            return
        call = view.call.model_copy(
            update={
                "decision": result.decision,
                "approvals": result.approvals,
                "message_ts": view.call.message_ts or message_ts,
            }
        )
        if call.message_ts is None:
            return
        run = RunView.of(view.envelope)
        self._later(self.reporter.redraw(run, call), f"redraw:{call.approval_id}")

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
        self._later(work, "ephemeral")

    def _later(self, work: Coroutine[Any, Any, Any], name: str) -> None:
        self.tasks.spawn(_logged(work, name), name=name)


def _thread(view: CallView | None) -> str | None:
    return view.envelope.conversation.thread if view and view.envelope else None


def _is_own_retry(result: RecordResult, choice: Choice) -> bool:
    """A retried request (after a lost reply) finds its own decision: that is success."""
    decision = result.decision
    return (
        result.status == "decided"
        and decision is not None
        and decision.user_id == choice.user_id
        and decision.outcome == choice.outcome
        and decision.reason == choice.reason
    )


def _dig(body: object, *path: str) -> str | None:
    for key in path:
        body = body.get(key) if isinstance(body, dict) else None
    return body if isinstance(body, str) and len(body) < 64 else None


async def _logged(work: Coroutine[Any, Any, Any], name: str) -> None:
    try:
        await work
    except SlackApiError as error:
        log.warning("%s: Slack refused: %s", name, error.response.get("error"))
    except (ClientError, TimeoutError) as error:
        log.warning("%s: Slack unreachable: %s", name, type(error).__name__)
