"""Applying recorded decisions to a restored SDK RunState: what the model is told."""

from __future__ import annotations

import logging
from typing import Any

from agents import RunState

from runtime.envelope import Decision, PendingCall

log = logging.getLogger(__name__)


def rejection_message(decision: Decision | None, tool: str) -> str:
    """The tool result the model sees instead of the tool's output."""
    if decision is None:
        return f"The call to {tool} was not run: no decision was recorded for it."
    if decision.outcome == "expired":
        return (
            f"The call to {tool} was not run: no one approved or rejected it in time, "
            "so the request expired. Tell the user it was not done."
        )
    who = decision.user_name or decision.user_id or "an approver"
    if decision.user_name and decision.user_id:
        who = f"{decision.user_name} ({decision.user_id})"
    reason = (decision.reason or "").strip() or "no reason given"
    return f"The call to {tool} was rejected by {who}. Reason: {reason}"


def apply_decisions(state: RunState[Any, Any], calls: tuple[PendingCall, ...]) -> int:
    """Approve or reject every pending interruption; return how many were approved.

    Items must come from the restored state's own `get_interruptions()`: the SDK matches them
    by identity.
    """
    by_call_id = {call.call_id: call for call in calls}
    approved = 0
    for item in state.get_interruptions():
        call = by_call_id.get(item.call_id or "")
        decision = call.decision if call else None
        if decision is not None and decision.outcome in ("approved", "approved_always"):
            state.approve(item, always_approve=decision.outcome == "approved_always")
            approved += 1
        else:
            if call is None:
                log.warning("interruption %s has no stored approval; rejecting it", item.call_id)
            state.reject(item, rejection_message=rejection_message(decision, item.name or "?"))
    return approved
