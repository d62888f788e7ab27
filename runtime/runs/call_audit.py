"""The audit entries of a round's calls: `requested` for those that ask a person (written by
the script that opens them), and the entry of a call decided without one (an `auto` rule, an
Approve always of the run), written once per call (`RunStore.announce`)."""

from __future__ import annotations

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.record.envelope import Decision, PendingCall, RunEnvelope


def requested(
    audit: AuditTrail, envelope: RunEnvelope, calls: tuple[PendingCall, ...]
) -> tuple[str, ...]:
    """The `requested` audit entries of the calls that ask a person, for the script that opens
    them (`RunStore.wait_for_approvals`), with who may decide (comma-separated; empty: anyone
    in the channel) and the arguments as the trail keeps them."""
    return tuple(
        audit.entry(
            AuditEvent.REQUESTED,
            envelope.run_id,
            **audit_fields(envelope, call),
            approvers=",".join(call.approvers),
            **audit.arguments.fields(call.arguments),
        )
        for call in calls
        if call.decision is None
    )


def audit_fields(envelope: RunEnvelope, call: PendingCall) -> dict[str, str | int | None]:
    return {
        **({"mcp_server": call.mcp_server} if call.mcp_server else {}),
        "approval_id": call.approval_id,
        "call_id": call.call_id,
        "tool": call.tool,
        "agent": call.agent,
        "requester": envelope.conversation.requester,
        "channel": envelope.conversation.channel,
        "digest": call.digest,
        "quorum": call.quorum,
        # The `when` of the rule that chose who decides, for whoever reads the trail.
        **({"when": call.when} if call.when else {}),
        **({"rule": call.rule_name} if call.rule_name else {}),
        # Rules that could not be judged, and arguments the tool would refuse.
        **({"unjudged": unjudged_text(call)} if call.unjudged else {}),
        **({"invalid": call.invalid} if call.invalid else {}),
    }


def unjudged_text(call: PendingCall) -> str:
    """The rules that could not be judged for `call` and why, as the trail keeps them:
    `refunds over $1,000: the call has no `amount_cents``, several joined by "; "."""
    return "; ".join(f"{u.rule}: {u.reason}" for u in call.unjudged)


def decided_entry(
    audit: AuditTrail, envelope: RunEnvelope, call: PendingCall, decision: Decision
) -> str:
    """The entry of `call`, `decision` made without a person by a rule or an Approve always."""
    details = {**audit_fields(envelope, call), **audit.arguments.fields(call.arguments)}
    if not decision.by_policy:
        # An Approve always of this run: the person who pressed it approved this call too.
        always_on = next(a for a in decision.approvals if a.outcome == "approved_always")
        return audit.entry(
            AuditEvent.APPROVED,
            envelope.run_id,
            **details,
            user_id=decision.user_id,
            user_name=decision.user_name,
            via="always",
            always_at=always_on.at,
        )
    approved = decision.outcome == "approved"
    event = AuditEvent.AUTO_APPROVED if approved else AuditEvent.AUTO_REJECTED
    return audit.entry(event, envelope.run_id, **details, reason=decision.reason)
