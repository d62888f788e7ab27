"""Typed confirmations: **Approve** on a call whose policy rule has `confirm = "name"` opens a
modal asking for that argument's value; the submission is an approval carrying what was typed,
and the decision script compares it with the value in the arguments its digest binds
(`runtime/record/lua/choices.lua`), so no web process can approve without it. A wrong value
comes back in the modal and records nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.confirmations import CONFIRM_ACTION, CONFIRM_BLOCK, confirm_modal
from bot.listeners.approvals import ApprovalActions, card_metadata
from bot.slack.client import open_modal
from bot.slack.payloads import ApprovalRef, RejectMetadata, ViewSubmission
from bot.words import choices as messages
from runtime.decisions import Choice

log = logging.getLogger(__name__)


class ConfirmMetadata(RejectMetadata):
    """What the confirmation modal carries from the click to the submission (as Reject's)."""


@dataclass(kw_only=True)
class ConfirmActions:
    actions: ApprovalActions
    client: AsyncWebClient

    async def on_approve_typed(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Open the confirmation modal, after the same checks as a decision (recording
        nothing)."""
        await ack()
        decidable = await self.actions.decidable(body)
        if decidable is None:
            return
        click, view, call = decidable
        metadata = card_metadata(ConfirmMetadata, click, view)
        modal = confirm_modal(call, metadata.model_dump_json())
        open_modal(self.actions.tasks, self.client, click.trigger_id, modal, "confirm-modal")

    async def on_confirm_submitted(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        parsed = ViewSubmission.with_metadata(body, ConfirmMetadata)
        if parsed is None:
            log.warning("confirmation with an invalid payload refused")
            await ack()
            return
        submission, meta = parsed
        typed = submission.text_input(CONFIRM_BLOCK, CONFIRM_ACTION)
        choice = Choice(
            outcome="approved",
            user_id=submission.user.id,
            user_name=submission.user.display,
            confirm=typed,
        )
        ref = ApprovalRef(run_id=meta.run_id, approval_id=meta.approval_id, digest=meta.digest)
        # Recorded before the acknowledgement: a wrong value is answered in the modal.
        answer = await self.actions.ask(ref, choice, submission.user, meta.channel, meta.message_ts)
        if answer.result is not None and answer.result.status == "confirm_wrong":
            call = answer.view.call if answer.view else None
            name = call.confirm if call and call.confirm else "value"
            await ack(
                response_action="errors", errors={CONFIRM_BLOCK: messages.confirm_wrong(name)}
            )
            return
        if answer.failure is not None and answer.unconfirmed is None:
            # Nothing was recorded (Slack or Redis could not say): they may submit again.
            await ack(response_action="errors", errors={CONFIRM_BLOCK: answer.failure[:1000]})
            return
        await ack()
        self.actions.follow_up(answer, ref, choice, submission.user, meta.channel, meta.message_ts)
