"""The round in which a held output waits for a person (`runtime.journal.held`).

The call asks again, like a call whose result was lost (`runtime.runs.lost_outcomes`): the same
gate (who may decide it under the policy, its quorum), a new approval id and deadline, and the
round's other calls keep their decisions. Its card shows the output, and its digest binds it; it
offers no "always", grant, argument edit or typed confirmation. Nobody deciding before the
deadline withholds it, as an expiry rejects a call. **Edit and release** is offered (as the
gate's answer) when the output fits its modal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agents import RunResult

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.jobs.contracts import new_approval_id
from runtime.journal.held import EDITABLE_CHARS, HELD_CHARS, OutputHeld
from runtime.policy import Policy
from runtime.record.envelope import PendingCall, RunEnvelope

_APPROVED = ("approved", "approved_always")


@dataclass(frozen=True, kw_only=True, slots=True)
class Resumable:
    """A round that asked nobody (every call decided by the policy, a grant or an Approve
    always), kept while it runs in case one of its calls' output is held: the run then waits
    in it, its calls' decisions as they were, the held call asking for a person."""

    state: str
    calls: tuple[PendingCall, ...]


def resumable_round(result: RunResult, calls: tuple[PendingCall, ...]) -> Resumable | None:
    """The round's state (before its decisions are applied) and calls, when a call of it holds
    its output; None otherwise (nothing to keep)."""
    if not any(call.review_output for call in calls):
        return None
    state = json.dumps(result.to_state().to_json(), separators=(",", ":"))
    return Resumable(state=state, calls=calls)


def held_in(signal: Exception, resumable: Resumable | None) -> Exception:
    """`signal`, and, when it is an output held by a call of the `resumable` round, where it
    waits (`OutputHeld.resume_state`)."""
    if not isinstance(signal, OutputHeld) or resumable is None:
        return signal
    if any(call.call_id == signal.call_id for call in resumable.calls):
        signal.resume_state, signal.resume_calls = resumable.state, resumable.calls
    return signal


def held_round(
    calls: tuple[PendingCall, ...], held: OutputHeld, policy: Policy, *, now: float
) -> tuple[PendingCall, ...] | None:
    """The calls of the run's next round, from the round the call ran in (`calls`): the held
    call asks for its output's release (at `now`, Redis's clock); None when it is not one of
    that round's approved calls, so the run ends unreleased."""
    call = next((c for c in calls if c.call_id == held.call_id), None)
    if call is None or call.decision is None or call.decision.outcome not in _APPROVED:
        return None
    rule = policy.rule_for(call.tool, call.agent, call.mcp_server)
    again = call.model_copy(
        update={
            "approval_id": new_approval_id(),
            "expires_at": now + rule.ttl_seconds,
            "digest": held.digest,
            "held": held.output[:HELD_CHARS],
            "allow_always": False,
            "allow_edit": False,
            # **Edit and release** is an answer on the held gate, where the output fits its modal.
            "answer": len(held.output) <= EDITABLE_CHARS,
            "confirm": None,
            "grant_max_seconds": 0,
            "lost": False,
            "message_ts": None,
            "decision": None,
            "approvals": (),
            "edit": None,
            "copies": (),
            "preview": None,
        }
    )
    return tuple(again if c is call else c for c in calls)


def held_entry(audit: AuditTrail, envelope: RunEnvelope, held: OutputHeld) -> str:
    """The `output_held` audit entry, written with the round that asks for the release."""
    return audit.entry(
        AuditEvent.OUTPUT_HELD,
        envelope.run_id,
        call_id=held.call_id,
        tool=held.tool,
        digest=held.digest,
        channel=envelope.conversation.channel,
        requester=envelope.conversation.requester,
    )
