"""Who hears of a call besides its thread, and when: copies to the rule's `notify`, a reminder at
each `REMINDER_AT` fraction of its lifetime, and an escalation to `escalate_to` once
`escalate_after_seconds` pass without a decision.

Written with the call when the run stops for it (field `reach:<id>` of the run record, plain
JSON beside the gate), so editing the policy never changes what an open call was promised. The
reminders due set holds one entry per call, due at its next nudge (`runtime.waiting.reminders`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from runtime.policy import Policy
from runtime.record import layout as rr
from runtime.record.call_rule import CallRule
from runtime.record.envelope import PendingCall
from runtime.record.reach import CallReach


@dataclass(frozen=True, kw_only=True, slots=True)
class ReachPlan:
    fields: dict[str, str]
    """`reach:<id>` per open call, for the run record."""
    first_due: dict[str, float]
    """Approval id -> its first nudge, for the reminders due set."""
    notify: dict[str, tuple[str, ...]]
    """Approval id -> where its rule sends copies of its card (`notify`), for every open call."""


def plan_reach(
    calls: Iterable[PendingCall],
    policy: Policy,
    *,
    now: float,
    reminder_at: tuple[float, ...],
    rules: Mapping[str, CallRule] | None = None,
) -> ReachPlan:
    """The reach of each open call: its rule's `notify` and escalation (`rules`: the rule each
    call was judged under, by approval id; a call not there, by its names alone), and the
    reminders."""
    fields: dict[str, str] = {}
    first_due: dict[str, float] = {}
    notify: dict[str, tuple[str, ...]] = {}
    for call in calls:
        if call.decision is not None:
            continue
        rule = (rules or {}).get(call.approval_id) or policy.rule_for(
            call.tool, call.agent, call.mcp_server
        )
        lifetime = call.expires_at - now
        escalate_at = None
        if rule.escalate_after_seconds is not None and rule.escalate_to:
            escalate_at = now + rule.escalate_after_seconds
        reach = CallReach(
            asked_at=now,
            notify=rule.notify,
            remind_at=tuple(now + lifetime * fraction for fraction in reminder_at if fraction > 0),
            escalate_at=escalate_at if escalate_at and escalate_at < call.expires_at else None,
            escalate_to=rule.escalate_to,
        )
        fields[rr.REACH + call.approval_id] = reach.model_dump_json()
        notify[call.approval_id] = reach.notify
        if nudges := reach.nudges():
            first_due[call.approval_id] = nudges[0].at
    return ReachPlan(fields=fields, first_due=first_due, notify=notify)
