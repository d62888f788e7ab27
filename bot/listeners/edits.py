"""Edit, then approve: **Edit** on a card opens the arguments in a modal; a valid submission
approves the edited call.

The submission is parsed and checked against the tool's schema (written with the call by the
worker) before anything is recorded; a problem comes back in the modal next to the field, as
does an edit whose arguments a rule blocks. A valid edit is a decision like a click on Approve,
recorded by the decision script together with the edited arguments and their digest, and refused
there if the editor may not decide, the policy does not allow edits, or the arguments changed
since the modal opened. An edit whose arguments fall under a stricter rule than the call's (a
rule's `when`, read at decision time) is not approved: the script stores it and puts the call
under that rule's gate (`CallGate.regated_to`), the card is redrawn under the new rule, and the
editor is told why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from pydantic import Field
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.edits import EDIT_ACTION, EDIT_BLOCK, edit_modal, editable
from bot.listeners.approvals import ApprovalActions
from bot.slack.client import open_modal
from bot.slack.payloads import (
    MESSAGE_TS,
    SLACK_ID,
    ApprovalRef,
    SlackUser,
    ViewSubmission,
    _Payload,
)
from bot.words import choices as choice_messages
from bot.words import runs as messages
from bot.words.runs import user
from runtime.calls import call_digest
from runtime.deciders import is_group, own_call
from runtime.decisions import Choice, EditChoice, InvalidEdit, parse_edit, stricter_rule
from runtime.jobs import APPROVAL_ID_PATTERN, RUN_ID_PATTERN
from runtime.policy import Policy
from runtime.record import CallGate

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
        decidable = await self.actions.decidable(body)
        if decidable is None:
            return
        click, view, call = decidable
        gate = view.gate
        refusal = None
        if not editable(call):
            refusal = choice_messages.EDIT_NOT_OFFERED
        elif gate is not None and own_call(gate, click.user.id):
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
        open_modal(self.actions.tasks, self.client, click.trigger_id, modal, "edit-modal")

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
            # Against the rule the call is under now: an earlier edit may have re-gated it.
            current = view.gate.applied_to(view.call) if view.gate else view.call
            stricter = await stricter_rule(self.policy, current, conversation, text)
        digest = call_digest(view.call.tool, text, view.call.mcp_server)
        if stricter is not None and (
            stricter.auto == "reject" or view.gate is None or digest == meta.digest
        ):
            # Blocked (or nothing edited to re-gate): nothing is recorded.
            who = list(stricter.approvers) if stricter.auto != "reject" else []
            refusal = choice_messages.edit_under_stricter_rule(stricter.when, who, stricter.quorum)
            await ack(response_action="errors", errors={EDIT_BLOCK: refusal[:1000]})
            return
        await ack()
        edit = None
        if digest != meta.digest:
            edit = EditChoice(arguments=text, digest=digest, previous_digest=meta.digest)
        regate = None
        if stricter is not None and view.gate is not None:
            # Approving here would skip the stricter rule's approvers: the call takes its gate.
            regate = view.gate.regated_to(stricter, text, digest)
        choice = Choice(
            outcome="approved",
            user_id=submission.user.id,
            user_name=submission.user.display,
            edit=edit,
            regate=regate.stored() if regate is not None else None,
        )
        # Approving unchanged or edited, what the modal showed must still be the call.
        ref = ApprovalRef(run_id=meta.run_id, approval_id=meta.approval_id, digest=meta.digest)
        if regate is None:
            await self.actions.record(ref, choice, submission.user, meta.channel, meta.message_ts)
        else:
            await self._regate(ref, choice, regate, submission.user, meta)

    async def _regate(
        self,
        ref: ApprovalRef,
        choice: Choice,
        regate: CallGate,
        actor: SlackUser,
        meta: EditMetadata,
    ) -> None:
        """Store the edit and put the call under the stricter rule's gate (the decision script),
        redraw the card under it and tell the editor why their edit was not approved."""
        answer = await self.actions.ask(ref, choice, actor, meta.channel, meta.message_ts)
        view = answer.view
        if answer.result is None or answer.result.status != "regated" or view is None:
            self.actions.follow_up(answer, ref, choice, actor, meta.channel, meta.message_ts)
            return
        # The card is drawn from the gate the script just wrote, not the one read before.
        answer = replace(answer, view=replace(view, gate=regate))
        self.actions.follow_up(answer, ref, choice, actor, meta.channel, meta.message_ts)
        approvers = () if regate.anyone else (*regate.users, *regate.groups)
        mentions = [f"<!subteam^{p}>" if is_group(p) else user(p) for p in approvers]
        text = choice_messages.edit_regated(
            regate.when, regate.rule_name, mentions, regate.quorum, confirm=regate.confirm
        )
        thread = view.envelope.conversation.thread if view.envelope else None
        self.actions.tell(meta.channel, actor.id, thread, text)
