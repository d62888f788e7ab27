"""Edit, then approve: **Edit** on a card opens the arguments in a modal; a valid submission
approves the edited call.

The submission is parsed and checked against the tool's schema (written with the call by the
worker) before anything is recorded; a problem comes back in the modal next to the field, as
does an edit whose arguments fall under a stricter policy rule than the call's (a rule's `when`,
read at decision time). A valid edit is a decision like a click on Approve, recorded by the
decision script together with the edited arguments and their digest, and refused there if the
editor may not decide, the policy does not allow edits, or the arguments changed since the modal
opened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import Field
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.edits import EDIT_ACTION, EDIT_BLOCK, edit_modal, editable
from bot.listeners.approvals import ApprovalActions
from bot.slack.client import send_later
from bot.slack.payloads import MESSAGE_TS, SLACK_ID, ApprovalRef, ViewSubmission, _Payload
from bot.words import choices as choice_messages
from bot.words import runs as messages
from runtime.calls import call_digest
from runtime.decisions import Choice, EditChoice, InvalidEdit, parse_edit, stricter_rule
from runtime.jobs import APPROVAL_ID_PATTERN, RUN_ID_PATTERN
from runtime.policy import Policy

log = logging.getLogger(__name__)


class EditMetadata(_Payload):
    """What the edit modal carries from the click to the submission."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    approval_id: str = Field(pattern=APPROVAL_ID_PATTERN)
    channel: str = Field(pattern=SLACK_ID)
    message_ts: str | None = Field(None, pattern=MESSAGE_TS)
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The digest of the arguments the modal showed."""


@dataclass(kw_only=True)
class EditActions:
    actions: ApprovalActions
    client: AsyncWebClient
    policy: Policy
    """Read at decision time: edited arguments may fall under another rule."""

    async def on_edit(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Open the editor, after the same checks as a decision (recording nothing)."""
        await ack()
        click = self.actions.parse_click(body)
        if click is None:
            return
        view = await self.actions.may_decide(click)
        if view is None or view.call is None:
            return
        call, gate = view.call, view.gate
        refusal = None
        if not editable(call):
            refusal = choice_messages.EDIT_NOT_OFFERED
        elif gate is not None and click.user.id == gate.requester and not gate.self_ok:
            # Editing approves: the requester may only reject their own run's calls.
            refusal = messages.SELF_APPROVAL_REFUSED
        if refusal is not None:
            thread = view.envelope.conversation.thread if view.envelope else None
            self.actions.tell(click.channel.id, click.user.id, thread, refusal)
            return
        metadata = EditMetadata(
            run_id=view.run_id,
            approval_id=view.approval_id,
            channel=click.channel.id,
            message_ts=click.container.message_ts,
            digest=call.shown_digest,
        )
        modal = edit_modal(call, metadata.model_dump_json())
        work = self.client.views_open(trigger_id=click.trigger_id, view=modal)
        send_later(self.actions.tasks, work, "edit-modal")

    async def on_edit_submitted(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        parsed = ViewSubmission.with_metadata(body, EditMetadata)
        if parsed is None:
            log.warning("edit submission with an invalid payload refused")
            await ack()
            return
        submission, meta = parsed
        text = submission.text_input(EDIT_BLOCK, EDIT_ACTION)
        try:
            view = await self.actions.recorder.view(meta.run_id, meta.approval_id)
        except RedisError:
            await ack(response_action="errors", errors={EDIT_BLOCK: messages.TRY_AGAIN})
            return
        if view.call is None:
            await ack(response_action="errors", errors={EDIT_BLOCK: messages.APPROVAL_UNKNOWN})
            return
        try:
            parse_edit(text, view.call.params_schema)
        except InvalidEdit as problem:
            # Nothing is recorded: the person fixes it in the modal.
            await ack(response_action="errors", errors={EDIT_BLOCK: str(problem)[:1000]})
            return
        stricter = None
        if view.envelope is not None:
            conversation = view.envelope.conversation
            stricter = stricter_rule(self.policy, view.call, conversation, text)
        if stricter is not None:
            # Approving here would skip the stricter rule's approvers: nothing is recorded.
            who = list(stricter.approvers) if stricter.auto != "reject" else []
            refusal = choice_messages.edit_under_stricter_rule(stricter.when, who, stricter.quorum)
            await ack(response_action="errors", errors={EDIT_BLOCK: refusal[:1000]})
            return
        await ack()
        digest = call_digest(view.call.tool, text, view.call.mcp_server)
        edit = None
        if digest != meta.digest:
            edit = EditChoice(arguments=text, digest=digest, previous_digest=meta.digest)
        choice = Choice(
            outcome="approved",
            user_id=submission.user.id,
            user_name=submission.user.display,
            edit=edit,
        )
        # Approving unchanged or edited, what the modal showed must still be the call.
        ref = ApprovalRef(run_id=meta.run_id, approval_id=meta.approval_id, digest=meta.digest)
        await self.actions.record(ref, choice, submission.user, meta.channel, meta.message_ts)
