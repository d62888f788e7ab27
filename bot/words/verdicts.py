"""What a card and a status message say about how the policy judged a call: a rule that could
not be judged, arguments the tool would refuse, a call an Approve always of the run approved."""

from __future__ import annotations

from collections.abc import Sequence

from bot.words.runs import RULE_CHARS, escape, user
from runtime.record import UnjudgedRule


def unjudged_line(unjudged: Sequence[UnjudgedRule]) -> str:
    """The rules a call's `when` could not be judged for, and why: it must satisfy each and the
    rule it fell under otherwise, and nothing approves it by itself."""
    said = "; ".join(
        f"{escape(' '.join(u.rule.split())[:RULE_CHARS])} ({escape(u.reason)})" for u in unjudged
    )
    rules = "that rule" if len(unjudged) == 1 else "those rules"
    return (
        f":warning: Could not be judged: {said}. This call must satisfy {rules} and the one it "
        "falls under otherwise, and nothing approves it by itself."
    )


def invalid_line(tool: str, problem: str) -> str:
    """Arguments the tool would refuse: nothing approves the call by itself."""
    return (
        f":warning: These arguments do not fit `{escape(tool)}` ({escape(problem)}): no grant, "
        "Approve always or automatic approval covers the call. Reject it, or edit it."
    )


def approved_by_always(tool: str, user_id: str) -> str:
    """A status step: a call an earlier **Approve always** of the run approved under its rule."""
    return f"`{escape(tool)}` approved by {user(user_id)}'s Approve always (same rule)"
