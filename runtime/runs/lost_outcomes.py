"""A call that may have run but whose result was lost: a person decides whether it runs again.

A retried step that reaches an approved call with a start mark and no recorded outcome
(`runtime.record.starts`) does not run the tool: the journal raises `OutcomeLost`, and the run
stops for one more round in which that call asks again, on a card that says "`pay` may have
run; its result was lost" with **Run again** and **Reject**. The card is an approval like any
other: the same gate (who may decide the call under the policy, its quorum), digest binding,
decision script and audit trail; it offers no "always", grant or edit. The round's other calls
keep their decisions. **Run again** runs the call once more, with the same `idempotency_key`;
**Reject** tells the model that it may have run, that its result was lost and that it was not
run again.

A call outside the round's approvals (one the policy let run without a person), or one that ran
with arguments a person edited, is not asked about again: the run ends, and the thread says the
call may have run.
"""

from __future__ import annotations

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.jobs.contracts import new_approval_id
from runtime.policy import Policy
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.starts import OutcomeLost


def asked_again(
    envelope: RunEnvelope, lost: OutcomeLost, policy: Policy, *, now: float
) -> tuple[PendingCall, ...] | None:
    """The calls of the run's next round: the lost call asks again (at `now`, Redis's clock)
    and the round's other calls keep their decisions; None when the call is not one of the
    round's approved calls, or ran with arguments a person edited (the card would show, and
    bind, the model's)."""
    call = next((c for c in envelope.calls if c.call_id == lost.call_id), None)
    if call is None or call.decision is None or call.decision.outcome not in _APPROVED:
        return None
    if call.decision.edit is not None:
        return None
    # Its gate stays the call's; only how long it waits comes from the policy now.
    rule = policy.rule_for(call.tool, call.agent, call.mcp_server)
    again = call.model_copy(
        update={
            "approval_id": new_approval_id(),
            "expires_at": now + rule.ttl_seconds,
            "allow_always": False,
            "allow_edit": False,
            "answer": False,  # it may have run: run it again, or tell the model it may have
            "grant_max_seconds": 0,
            "lost": True,
            "message_ts": None,
            "decision": None,
            "approvals": (),
            "edit": None,
            "copies": (),
        }
    )
    return tuple(again if c is call else c for c in envelope.calls)


_APPROVED = ("approved", "approved_always")


def run_again(envelope: RunEnvelope) -> frozenset[str]:
    """Call ids of the round that a person said to run again after their result was lost."""
    return frozenset(
        call.call_id
        for call in envelope.calls
        if call.lost and call.decision is not None and call.decision.outcome in _APPROVED
    )


def lost_entry(audit: AuditTrail, envelope: RunEnvelope, lost: OutcomeLost) -> str:
    """The `outcome_lost` audit entry, written with the round that asks again."""
    return audit.entry(
        AuditEvent.OUTCOME_LOST,
        envelope.run_id,
        call_id=lost.call_id,
        tool=lost.tool,
        channel=envelope.conversation.channel,
        requester=envelope.conversation.requester,
    )


def not_run_again_message(tool: str, rejection: str) -> str:
    """What the model reads when a lost call is not run again (`rejection`: why, as
    `state_decisions.rejection_message` says it)."""
    return (
        f"The call to {tool} may have run earlier, but its result was lost, and it was not run "
        f"again: {rejection.removeprefix(f'The call to {tool} ').rstrip('.')}. Tell the user "
        "it may or may not have been done."
    )
