"""What people are told when Redis failed over and lost a decision they were told was recorded
(`bot.reporting.failovers`)."""

from __future__ import annotations

from bot.words.runs import PRODUCT, escape, user

LOST_BECAUSE = f"{PRODUCT}'s database failed over to a replica that never received it"


_DECISIONS = {"rejected": "rejection", "answered": "answer"}
_AGAIN = {"rejected": "Reject it again", "answered": "Answer it again"}


def _decision(outcome: str) -> str:
    return _DECISIONS.get(outcome, "approval")


def lost_line(user_id: str, outcome: str) -> str:
    """On the card drawn again with its buttons."""
    return (
        f":warning: The {_decision(outcome)} by {user(user_id)} was lost: {LOST_BECAUSE}. "
        "Nothing was decided: it must be made again."
    )


def lost_note(tool: str, outcome: str) -> str:
    """To the person whose decision it was, privately."""
    again = _AGAIN.get(outcome, "Approve it again")
    return (
        f"Your {_decision(outcome)} of `{escape(tool or 'this call')}` was lost: {LOST_BECAUSE}, "
        f"so it does not count and the card asks again. {again} if you still mean it."
    )


def void_line(user_id: str, outcome: str) -> str:
    """On a card whose call the new primary does not have at all (that step of the run, or the
    run, was lost too): no buttons."""
    return (
        f":warning: This card no longer counts. The {_decision(outcome)} by {user(user_id)} was "
        f"lost, with this step of the run: {LOST_BECAUSE}. If the run asks again, it posts a "
        "new card in this thread; if nothing comes, start the task again."
    )


def void_note(tool: str, outcome: str) -> str:
    return (
        f"Your {_decision(outcome)} of `{escape(tool or 'this call')}` was lost with that step "
        f"of its run: {LOST_BECAUSE}, so it does not count. If the run asks again, a new card "
        "appears in its thread; if nothing comes, start the task again."
    )
