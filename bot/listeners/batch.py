"""**Approve all** and **Reject all** on a waiting run's status message.

The click opens a modal listing every waiting call whole (all its arguments) with the digest it
will be bound to, leaving out of the batch, with a sentence, a call it cannot show whole; the
submission goes through the gate's lookups (workspace standing, groups) exactly as a click on
each card would, then one batch of the decision script (`runtime.decisions.batch`) decides every
call or none. Each card is then redrawn, and the status message, as single clicks would."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck

from bot.blocks.batch import REASON_ACTION, REASON_BLOCK, batch_listing, batch_modal
from bot.listeners.approvals import ApprovalActions
from bot.listeners.gate import GateAnswer
from bot.slack.client import open_modal, send_later
from bot.slack.directory import DirectoryUnavailable
from bot.slack.members import StandingUnknown
from bot.slack.payloads import SLACK_ID, ApprovalRef, ButtonClick, SlackUser, ViewSubmission
from bot.words import batch as words
from bot.words import held as held_words
from bot.words import members as member_messages
from bot.words import runs as messages
from runtime.db import NotReplicated
from runtime.deciders import one_by_one, own_call
from runtime.decisions import (
    BatchRecorder,
    BatchResult,
    CallView,
    Choice,
    RecordResult,
    waiting_views,
)
from runtime.jobs import RUN_ID_PATTERN
from runtime.metrics import count_decision

log = logging.getLogger(__name__)

MAY_NOT = frozenset({"not_allowed", "self", "outside", "unreadable", "not_offered"})


class BatchMetadata(BaseModel):
    """What the modal carries from the click to the submission: the digests it showed."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    channel: str = Field(pattern=SLACK_ID)
    round: str = Field(max_length=12)
    approving: bool
    calls: dict[str, str] = Field(max_length=words.MOST_CALLS)
    """Approval id: the digest shown."""

    def valid(self) -> bool:
        """Every call an approval of this run, with a digest (raises ValidationError if not)."""
        refs = [
            ApprovalRef(run_id=self.run_id, approval_id=a, digest=d) for a, d in self.calls.items()
        ]
        return all(ref.digest for ref in refs)


@dataclass(kw_only=True)
class BatchActions:
    actions: ApprovalActions
    batch: BatchRecorder

    async def on_approve_all(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        await self._open(body, approving=True)

    async def on_reject_all(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        await self._open(body, approving=False)

    async def on_submitted(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        parsed = ViewSubmission.with_metadata(body, BatchMetadata)
        if parsed is None or not _valid(parsed[1]):
            log.warning("batch submission with an invalid payload refused")
            await ack()
            return
        submission, meta = parsed
        reason = None
        if not meta.approving:
            reason = submission.text_input(REASON_BLOCK, REASON_ACTION).strip()[:2000]
            if not reason:
                errors = {REASON_BLOCK: words.REJECT_ALL_REASON_REQUIRED}
                await ack(response_action="errors", errors=errors)
                return
        await ack()
        user = submission.user
        choice = Choice(
            outcome="approved" if meta.approving else "rejected",
            user_id=user.id,
            user_name=user.display,
            reason=reason,
        )
        text = await self._decide(meta, choice, user)
        self.actions.tell(meta.channel, user.id, None, text)

    # --- the modal ------------------------------------------------------------------------

    async def _open(self, body: dict[str, Any], *, approving: bool) -> None:
        try:
            click = ButtonClick.model_validate(body)
        except ValidationError:
            log.warning("batch click with an invalid payload refused")
            return
        channel, user, run_id = click.channel.id, click.user.id, click.action.value
        try:
            views = await waiting_views(self.actions.recorder, run_id)
        except RedisError:
            self.actions.tell(channel, user, None, words.TRY_AGAIN)
            return
        calls = [v.call for v in views if v.call is not None]
        single = [c.tool for c in calls if one_by_one(quorum=c.quorum, confirm=c.confirm)]
        held = [c.tool for c in calls if c.held is not None]  # shown on its card only
        if len(calls) < 2 or single or held or len(calls) > words.MOST_CALLS:
            text = (
                words.NOTHING_TO_BATCH
                if len(calls) < 2
                else held_words.HELD_ON_CARD
                if held
                else words.single_only(single)
                if single
                else words.TOO_MANY
            )
            self.actions.tell(channel, user, None, text)
            return
        refused = await self._may_not(views, click, approving=approving)
        if refused is not None:
            self.actions.tell(channel, user, None, refused)
            return
        # Only what the modal shows whole is in the batch: the others are decided on their cards.
        listing = batch_listing(calls, approving=approving)
        if not listing.shown:
            self.actions.tell(channel, user, None, words.NOTHING_SHOWN)
            return
        meta = BatchMetadata(
            run_id=run_id,
            channel=channel,
            round=views[0].round,
            approving=approving,
            calls={c.approval_id: c.shown_digest for c in listing.calls},
        )
        modal = batch_modal(listing, meta.model_dump_json(), approving=approving)
        open_modal(self.actions.tasks, self.actions.client, click.trigger_id, modal, "batch-modal")

    async def _may_not(
        self, views: list[CallView], click: ButtonClick, *, approving: bool
    ) -> str | None:
        """Why the clicker may not decide these calls, said before the modal opens (as a card's
        button says it), not after they have read and submitted it; None if they may. The
        submission still goes through the decision script, which alone decides."""
        user = click.user.id
        gates = [v.gate for v in views if v.gate is not None]
        if approving and gates and all(own_call(g, user) for g in gates):
            return words.OWN_CALLS
        gate = self.actions.gate
        for view in views:
            ref = ApprovalRef(run_id=view.run_id, approval_id=view.approval_id, digest=None)
            answer = await gate.check(ref, user, click.channel.id, claimed_team=click.user.team_id)
            if answer.result is not None and answer.result.status in MAY_NOT:
                return await gate.explanation(answer)
        return None

    # --- the decision ---------------------------------------------------------------------

    async def _decide(self, meta: BatchMetadata, choice: Choice, user: SlackUser) -> str:
        gate = self.actions.gate
        try:
            views = [await gate.recorder.view(meta.run_id, aid) for aid in meta.calls]
            standing = await gate.members.standing(user.id, claimed_team=user.team_id)
            member_of = {v.approval_id: await gate.groups_of(user.id, v.gate) for v in views}
            chosen = Choice(
                outcome=choice.outcome,
                user_id=choice.user_id,
                user_name=choice.user_name,
                reason=choice.reason,
                team=standing.team,
                outside=not standing.inside,
            )
            result = await self.batch.decide(
                meta.run_id,
                meta.round,
                chosen,
                channel=meta.channel,
                seen=meta.calls,
                member_of=member_of,
            )
        except NotReplicated:
            return messages.NOT_CONFIRMED
        except RedisError:
            return words.TRY_AGAIN
        except DirectoryUnavailable:
            return messages.DIRECTORY_UNAVAILABLE
        except StandingUnknown:
            return member_messages.STANDING_UNKNOWN
        return self._answer(meta, views, chosen, user, result)

    def _answer(
        self,
        meta: BatchMetadata,
        views: list[CallView],
        choice: Choice,
        user: SlackUser,
        result: BatchResult,
    ) -> str:
        tools = {v.approval_id: v.call.tool if v.call else v.approval_id for v in views}
        if result.status == "not_offered":
            return words.single_only([tools[a] for a in result.single])
        if result.status == "refused":
            log.info("batch by %s not recorded: %s", user.id, dict(result.refused))
            mine = [tools[a] for a, s in result.refused.items() if s in MAY_NOT]
            for view in views:
                if result.refused.get(view.approval_id) == "stale" and view.call is not None:
                    # As a stale click: the card is drawn anew, as the call stands.
                    stale = RecordResult(
                        status="stale", approvals=view.call.approvals, edit=view.call.edit
                    )
                    self._redraw(GateAnswer(view=view, result=stale))
            if mine:
                return words.not_yours(mine)
            return words.changed([tools[a] for a in result.refused])
        for view in views:
            one = result.results.get(view.approval_id)
            if one is None:
                continue
            if one.status == "recorded" and view.call is not None:
                count_decision(
                    one.decision,
                    tool=view.call.tool,
                    card_ts=view.call.message_ts,
                    quick_seconds=self.actions.gate.quick_approval_seconds,
                )
            answer = GateAnswer(view=view, result=one)
            self.actions.follow_up(answer, _ref(view), choice, user, meta.channel, None)
        return words.done(len(result.results), choice.outcome != "rejected")

    def _redraw(self, answer: GateAnswer) -> None:
        found = self.actions.gate.card_after(answer)
        if found is not None:
            work = self.actions.reporter.redraw(*found)
            send_later(self.actions.tasks, work, f"redraw:{found[1].approval_id}")


def _ref(view: CallView) -> ApprovalRef:
    return ApprovalRef(run_id=view.run_id, approval_id=view.approval_id, digest=None)


def _valid(meta: BatchMetadata) -> bool:
    try:
        return meta.valid()
    except ValidationError:
        return False
