"""The one path every click on a call takes, wherever the button is (the card, a copy, the Home
tab, the grant menu, the edit modal): read the call, find which of its approver groups the
clicker is in and whether they are a member of the installing workspace (`bot.slack.members`),
from the Home tab for a call anyone in its channel may decide also whether they are in that
channel (`bot.slack.channel_members`), then ask the decision script (`runtime.record.layout`) to
check or record. Every click carries the digest of the call as its element showed it
(`ApprovalRef.digest`); the script refuses it (`stale`) once the call has changed, e.g. by an
edit.

The decision itself is enforced by the script from the call's gate; a refused click records
nothing but one `denied` entry per person and call. What the clicker is then told is worded
here too, so every surface says the same thing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

from redis.exceptions import RedisError

from bot.reporting.reporter import SlackReporter
from bot.slack.channel_members import ChannelMembers, ChannelUnavailable
from bot.slack.directory import ApproverDirectory, DirectoryUnavailable
from bot.slack.members import StandingUnknown, WorkspaceMembers
from bot.slack.payloads import ApprovalRef
from bot.words import answers as answer_messages
from bot.words import choices as choice_messages
from bot.words import finished as finished_messages
from bot.words import held as held_messages
from bot.words import members as member_messages
from bot.words import runs as messages
from runtime.db import NotReplicated
from runtime.deciders import groups_of
from runtime.decisions import (
    CallView,
    Choice,
    DecisionRecorder,
    RecordResult,
    Status,
    UnconfirmedDecision,
)
from runtime.metrics import count_decision, count_denied
from runtime.record import HOME_TAB, CallGate, PendingCall
from runtime.reporter import RunView

log = logging.getLogger(__name__)

NOT_RECORDED = {
    "expired": messages.APPROVAL_EXPIRED,
    "closed": messages.APPROVAL_CLOSED,
    "unknown": messages.APPROVAL_UNKNOWN,
    "gone": messages.APPROVAL_UNKNOWN,
    "finished": finished_messages.RUN_FINISHED,
    "grant_not_offered": choice_messages.GRANT_NOT_OFFERED,
    "edit_not_offered": choice_messages.EDIT_NOT_OFFERED,
    "edit_stale": choice_messages.EDIT_STALE,
    "confirm_needed": choice_messages.CONFIRM_NEEDED,
    "stale": messages.CALL_CHANGED,
    "answer_not_offered": answer_messages.ANSWER_NOT_OFFERED,
    "held_on_card": held_messages.HELD_ON_CARD,
}
REFUSED = frozenset({"not_allowed", "self", "not_offered", "unreadable", "outside"})
MAY_DECIDE = frozenset({"open", "already_approved"})
CONFIRM_TRIES = 10
CONFIRM_PAUSE_SECONDS = 2.0
"""After a decision the replicas did not confirm, how long the card waits for them (about
30 s with `REDIS_WAIT_MS` at 1 s) before the person's own retry click is the only way."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GateAnswer:
    """What the script said about one click, or why it could not be asked (`failure`, a text
    for the clicker; nothing was recorded)."""

    view: CallView | None = None
    result: RecordResult | None = None
    failure: str | None = None
    unconfirmed: RecordResult | None = None
    """With `failure`: what the script stored, which counts once the replicas confirm it."""

    @property
    def may_decide(self) -> bool:
        """(After `check`) the clicker may decide this call now."""
        return (
            self.result is not None
            and self.view is not None
            and self.view.call is not None
            and self.result.status in MAY_DECIDE
        )

    @property
    def took_effect(self) -> bool:
        """(After `decide`) the choice is in: recorded now, counted towards a quorum, or found
        already recorded by this same person (a retried request)."""
        return self.result is not None and self.result.status in ("recorded", "counted", "regated")


@dataclass(kw_only=True)
class ApprovalGate:
    directory: ApproverDirectory
    recorder: DecisionRecorder
    members: WorkspaceMembers
    quick_approval_seconds: float = 5.0
    """`QUICK_APPROVAL_SECONDS`: an approval this soon after its card is counted as quick."""
    channels: ChannelMembers | None = None
    """Who is in a channel, for a call anyone there may decide, decided from the Home tab
    (None: such decisions are refused there, as the script refuses them without it)."""

    async def check(
        self, ref: ApprovalRef, user_id: str, channel: str, *, claimed_team: str | None = None
    ) -> GateAnswer:
        """Whether `user_id` may decide the call from `channel` now, recording nothing.
        `claimed_team`: the person's team as the signed payload names it (`user.team_id`)."""
        return await self._ask(ref, user_id, channel, None, claimed_team)

    async def decide(
        self,
        ref: ApprovalRef,
        choice: Choice,
        channel: str,
        *,
        message_ts: str | None = None,
        claimed_team: str | None = None,
    ) -> GateAnswer:
        """Record `choice` through the decision script. A retried request that finds its own
        decision answers `recorded` again, so the caller redraws and reports success.
        `message_ts` is the clicked card's: a click can come before the worker has stored
        the card's id, and the decision's latency is measured from it."""
        answer = await self._ask(ref, choice.user_id or "", channel, choice, claimed_team)
        result = answer.result
        if result is None:
            return answer
        if result.status == "recorded":
            call = answer.view.call if answer.view else None
            asked = call.message_ts if call and call.message_ts else message_ts
            count_decision(
                result.decision,
                tool=call.tool if call else "",
                card_ts=asked,
                quick_seconds=self.quick_approval_seconds,
            )
        elif _is_own_retry(result, choice):
            result = RecordResult(
                status="recorded",
                decision=result.decision,
                approvals=result.approvals,
                edit=result.edit,
            )
            return GateAnswer(view=answer.view, result=result)
        elif result.status in ("not_allowed", "self", "outside"):
            count_denied()
        return answer

    def card_after(
        self, answer: GateAnswer, message_ts: str | None = None
    ) -> tuple[RunView, PendingCall] | None:
        """The card as the choice left it (the decision, or the approvals so far), naming who
        may decide now; None when this version cannot read the record or the card is unknown
        (`message_ts`: the clicked card's, for a record that does not know it yet)."""
        view, result = answer.view, answer.result
        if view is None or result is None:
            return None
        if view.envelope is None or view.call is None:
            log.warning("run %s: card not redrawn (record unreadable here)", view.run_id)
            return None
        shown = view.gate.applied_to(view.call) if view.gate else view.call
        call = shown.model_copy(
            update={
                "decision": result.decision,
                "approvals": result.approvals,
                "message_ts": view.call.message_ts or message_ts,
                "edit": result.edit or view.call.edit,
            }
        )
        if call.message_ts is None:
            return None
        return RunView.of(view.envelope), call

    async def once_confirmed(self, answer: GateAnswer) -> GateAnswer | None:
        """For a choice stored but not confirmed (`answer.unconfirmed`): wait for the replicas,
        then the answer to redraw the card from, if the record still holds the choice (or is
        gone because the run went on). None when they never confirmed, or when the choice was
        lost (a failover): the card then keeps its buttons, which is the truth."""
        stored, view = answer.unconfirmed, answer.view
        if stored is None or view is None:
            return None
        for _ in range(CONFIRM_TRIES):
            await asyncio.sleep(CONFIRM_PAUSE_SECONDS)
            try:
                await self.recorder.confirm()
                now = await self.recorder.view(view.run_id, view.approval_id)
            except RedisError:
                continue
            if not now.exists:
                return GateAnswer(view=view, result=stored)
            if now.call is None or not _holds(now.call, stored):
                return None
            result = RecordResult(
                status=stored.status,
                decision=now.call.decision,
                approvals=now.call.approvals,
                edit=now.call.edit,
            )
            return GateAnswer(view=now, result=result)
        log.warning("run %s: the replicas never confirmed a decision", view.run_id)
        return None

    async def redraw_status(self, reporter: SlackReporter, answer: GateAnswer) -> None:
        """After a decision that leaves other calls of the run waiting, its status message says
        how many still wait (the worker redraws it once the run resumes)."""
        result, view = answer.result, answer.view
        if result is None or view is None or result.status != "recorded":
            return
        if result.resume_enqueued:
            return
        try:
            found = await self.recorder.waiting_status(view.run_id)
        except RedisError:
            log.warning("run %s: status not redrawn, Redis unreachable", view.run_id)
            return
        if found is not None:
            await reporter.progress(found.run, found.message_id, found.activity)

    async def explanation(self, answer: GateAnswer) -> str:
        """What to tell a person whose click did not take effect (may ask Slack for names)."""
        if answer.failure is not None:
            return answer.failure
        result, view = answer.result, answer.view
        if result is None or view is None:
            return messages.APPROVAL_UNKNOWN
        if result.status in REFUSED:
            return await self.refusal(result.status, view.gate) or messages.APPROVAL_UNKNOWN
        if result.status == "already_approved" and view.call is not None:
            return messages.already_approved(len(result.approvals), view.call.quorum)
        if result.status == "decided" and result.decision is not None:
            return messages.already_decided(result.decision)
        if result.status == "finished" and not view.exists:
            # The run was gone before this click was sent: the click recorded nothing. Else it
            # may be a late copy of a click that decided, and the words claim neither.
            return messages.APPROVAL_UNKNOWN
        if result.status in MAY_DECIDE and view.call is None:
            return (
                messages.OTHER_VERSION if view.exists and view.gate else messages.APPROVAL_UNKNOWN
            )
        return NOT_RECORDED.get(result.status, messages.APPROVAL_UNKNOWN)

    async def groups_of(self, user_id: str, gate: CallGate | None) -> tuple[str, ...]:
        """The gate's groups `user_id` belongs to (one is enough); raises DirectoryUnavailable
        when Slack cannot say in time, so the click is refused rather than guessed."""
        if gate is None:
            return ()
        # As for a rejection (which the requester may make): every group that can let them in.
        return await groups_of(gate, user_id, self.directory, approving=False)

    async def _channel_of(self, user_id: str, view: CallView, where: str) -> str | None:
        """From the Home tab, for a call anyone in its channel may decide: the call's channel
        (or a copy's) that Slack lists `user_id` in, for the script to check against the call's
        own; None elsewhere, or when Slack lists them in none. Raises `ChannelUnavailable` when
        Slack cannot say, so the click is refused rather than guessed."""
        gate = view.gate
        if where != HOME_TAB or gate is None or not gate.anyone or self.channels is None:
            return None
        copies = view.call.copies if view.call is not None else ()
        return await self.channels.channel_with(
            user_id, (gate.channel, *(copy.channel for copy in copies))
        )

    async def refusal(self, status: Status, gate: CallGate | None) -> str | None:
        """What to tell a person whose click the script refused; None for other outcomes."""
        if status == "self":
            return messages.SELF_APPROVAL_REFUSED
        if status == "not_offered":
            return messages.APPROVE_ALWAYS_NOT_OFFERED
        if status == "unreadable":
            return messages.OTHER_VERSION
        if status == "outside":
            return member_messages.OUTSIDE_WORKSPACE
        if status == "not_allowed" and gate is not None and gate.anyone:
            return member_messages.not_in_channel(gate.channel, gate.tool)
        if status == "not_allowed" and gate is not None:
            principals = [*gate.users, *gate.groups]
            names = await self.directory.names(principals)
            return messages.not_an_approver([names[p] for p in principals], gate.tool)
        return None

    async def _ask(
        self,
        ref: ApprovalRef,
        user_id: str,
        channel: str,
        choice: Choice | None,
        claimed_team: str | None,
    ) -> GateAnswer:
        view: CallView | None = None
        try:
            # Read before deciding: once the last decision is in, the worker may finish the run
            # and delete its record before the card is redrawn from this view.
            view = await self.recorder.view(ref.run_id, ref.approval_id)
            # The script refuses an outsider unless the call's gate says `external`.
            standing = await self.members.standing(user_id, claimed_team=claimed_team)
            outside = not standing.inside
            member_of = await self.groups_of(user_id, view.gate)
            in_channel = await self._channel_of(user_id, view, channel)
            if choice is None:
                result = await self.recorder.check(
                    view,
                    user_id,
                    channel=channel,
                    member_of=member_of,
                    seen=ref.digest,
                    team=standing.team,
                    outside=outside,
                    in_channel=in_channel,
                )
            else:
                chosen = replace(choice, team=standing.team, outside=outside, in_channel=in_channel)
                result = await self.recorder.decide(
                    view, chosen, channel=channel, member_of=member_of, seen=ref.digest
                )
        except UnconfirmedDecision as error:
            log.warning("run %s: decision not confirmed: %s", ref.run_id, error)
            return GateAnswer(view=view, failure=messages.NOT_CONFIRMED, unconfirmed=error.result)
        except NotReplicated as error:
            # Stored on the primary, not yet on enough replicas: the same click again succeeds
            # (it finds its own decision) once they confirm; the card keeps its buttons.
            log.warning("run %s: decision not confirmed: %s", ref.run_id, error)
            return GateAnswer(view=view, failure=messages.NOT_CONFIRMED)
        except RedisError:
            log.warning("run %s: click not recorded, Redis unreachable", ref.run_id)
            return GateAnswer(view=view, failure=messages.TRY_AGAIN)
        except ChannelUnavailable:
            log.warning("run %s: click not recorded, channel members unknown", ref.run_id)
            return GateAnswer(view=view, failure=member_messages.CHANNEL_UNAVAILABLE)
        except DirectoryUnavailable:
            log.warning("run %s: click not recorded, group members unknown", ref.run_id)
            return GateAnswer(view=view, failure=messages.DIRECTORY_UNAVAILABLE)
        except StandingUnknown:
            log.warning("run %s: click not recorded, workspace membership unknown", ref.run_id)
            return GateAnswer(view=view, failure=member_messages.STANDING_UNKNOWN)
        return GateAnswer(view=view, result=result)


def _holds(call: PendingCall, stored: RecordResult) -> bool:
    """The call's record still has what the script stored for this choice."""
    if stored.decision is not None:
        return call.decision == stored.decision
    # A quorum's approval: ours is the last of those counted then, unless the call has since
    # been decided (the rest of the quorum, or a rejection): redraw that.
    return call.decision is not None or set(stored.approvals[-1:]) <= set(call.approvals)


def _is_own_retry(result: RecordResult, choice: Choice) -> bool:
    """A retried request (after a lost reply) finds its own decision: that is success."""
    decision = result.decision
    return (
        result.status == "decided"
        and decision is not None
        and decision.user_id == choice.user_id
        and decision.outcome == choice.outcome
        and decision.reason == choice.reason
        and decision.answer == choice.answer
    )
