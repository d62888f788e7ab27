"""**Answer instead** and **Approve with a note…**: a card's buttons that open a modal asking
one text, whose submission is a decision like any other (`ApprovalActions.ask`: the decision
script checks who may decide, the card's digest, and that the call is still open).

An answer decides the call alone, as a rejection does: the tool does not run, and the model
reads the answer as the call's result (`runtime.runs.state_decisions.answered_message`); the
decision script refuses it where the call's rule says `answer = false`. A note comes with an
approval, which counts exactly as **Approve** does (the same quorum and digest); once the tool
has run the model reads its output followed by every approver's note
(`runtime.journal.invoker`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.cards import REASON_ACTION, REASON_BLOCK, answer_modal, note_modal
from bot.listeners.approvals import ApprovalActions, card_metadata
from bot.slack.client import open_modal
from bot.slack.payloads import ApprovalRef, RejectMetadata, ViewSubmission
from bot.words import answers as words
from bot.words import runs as run_words
from runtime.deciders import own_call
from runtime.decisions import CallView, Choice
from runtime.record import PendingCall

log = logging.getLogger(__name__)

Modal = Callable[[PendingCall, str, str | None], View]


@dataclass(kw_only=True)
class AnswerActions:
    actions: ApprovalActions
    client: AsyncWebClient

    async def on_answer(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Open the answer modal, after the same checks as a decision (recording nothing)."""
        await self._open(ack, body, answer_modal, "answer-modal", answering=True)

    async def on_note(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Open the note modal, after the same checks as a decision (recording nothing)."""
        await self._open(ack, body, note_modal, "note-modal", answering=False)

    async def on_answer_submitted(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await self._submitted(ack, body, answering=True)

    async def on_note_submitted(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await self._submitted(ack, body, answering=False)

    async def _open(
        self, ack: AsyncAck, body: dict[str, Any], modal: Modal, name: str, *, answering: bool
    ) -> None:
        await ack()
        decidable = await self.actions.decidable(body)
        if decidable is None:
            return
        click, view, call = decidable
        # Said before the modal, not after it was written (the checks above are a rejection's);
        # the submission still goes through the decision script, which alone decides.
        refused = None
        if view.gate is not None and own_call(view.gate, click.user.id):
            refused = run_words.SELF_APPROVAL_REFUSED
        elif answering and view.gate is not None and not view.gate.answer:
            refused = words.ANSWER_NOT_OFFERED
        if refused is not None:
            self.actions.tell(click.channel.id, click.user.id, _thread(view), refused)
            return
        metadata = card_metadata(RejectMetadata, click, view)
        requester = view.gate.requester if view.gate else None
        shown = modal(call, metadata.model_dump_json(), requester)
        open_modal(self.actions.tasks, self.client, click.trigger_id, shown, name)

    async def _submitted(self, ack: AsyncAck, body: dict[str, Any], *, answering: bool) -> None:
        parsed = ViewSubmission.with_metadata(body, RejectMetadata)
        if parsed is None:
            log.warning("%s submission with an invalid payload refused", _kind(answering))
            await ack()
            return
        submission, meta = parsed
        text = submission.text_input(REASON_BLOCK, REASON_ACTION).strip()
        if not text:
            required = words.ANSWER_REQUIRED if answering else words.NOTE_REQUIRED
            await ack(response_action="errors", errors={REASON_BLOCK: required})
            return
        await ack()
        user = submission.user
        if answering:
            choice = Choice(
                outcome="answered",
                user_id=user.id,
                user_name=user.display,
                answer=text[: words.ANSWER_CHARS],
            )
        else:
            choice = Choice(
                outcome="approved",
                user_id=user.id,
                user_name=user.display,
                note=text[: words.NOTE_CHARS],
            )
        ref = ApprovalRef(run_id=meta.run_id, approval_id=meta.approval_id, digest=meta.digest)
        await self.actions.record(ref, choice, user, meta.channel, meta.message_ts)


def _thread(view: CallView) -> str | None:
    return view.envelope.conversation.thread if view.envelope else None


def _kind(answering: bool) -> str:
    return "answer" if answering else "note"
