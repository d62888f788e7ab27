"""The words of batch decisions: **Approve all** and **Reject all** on a run's
status message, their modal, and why a batch recorded nothing."""

from __future__ import annotations

from collections.abc import Sequence

from bot.words.runs import escape

APPROVE_ALL = "Approve all"
REJECT_ALL = "Reject all"
APPROVE_ALL_TITLE = "Approve all"
REJECT_ALL_TITLE = "Reject all"
APPROVE_ALL_SUBMIT = "Approve all"
REJECT_ALL_SUBMIT = "Reject all"
CANCEL = "Cancel"
REJECT_ALL_LABEL = "Why? The agent reads this for each call."
REJECT_ALL_PLACEHOLDER = "e.g. Not during the freeze; ask #ops first."
REJECT_ALL_REASON_REQUIRED = "Please say why, so the agent can explain it."
MOST_CALLS = 20
"""The most calls one batch decides: the modal carries each one's digest (3,000 characters)."""

NOTHING_TO_BATCH = (
    "Fewer than two calls of this run are waiting, so there is nothing to decide all at once. "
    "Use the buttons on each card."
)
TOO_MANY = f"More than {MOST_CALLS} calls are waiting: decide them on their cards."
TRY_AGAIN = "Could not reach the run's record just now, so nothing was recorded. Try again."


def _tools(tools: Sequence[str]) -> str:
    return ", ".join(f"`{escape(tool)}`" for tool in tools)


def intro(count: int, approving: bool) -> str:
    verb = "approves" if approving else "rejects"
    these = "this call" if count == 1 else f"these {count} calls"
    return (
        f"This {verb} {these}, each exactly as shown here: all its arguments, and its digest. "
        "If any of them changes before you submit, or is not yours to decide, nothing is "
        "recorded."
    )


def call_header(tool: str, digest: str) -> str:
    return f"*`{escape(tool)}`* · call digest `sha256:{digest}`"


def left_out(tools: Sequence[str]) -> str:
    """Why calls are not in the list (the modal cannot show their arguments whole)."""
    return (
        f"{_tools(tools)} {'is' if len(tools) == 1 else 'are'} not in this list, because the "
        "arguments are too long to show here whole: decide on the card."
    )


NOTHING_SHOWN = (
    "The waiting calls' arguments are too long to show whole in one list, so decide each on its "
    "card."
)


def single_only(tools: Sequence[str]) -> str:
    return (
        f"{_tools(tools)} needs a quorum or a typed "
        "confirmation, so this run's calls are decided on their cards, one by one."
    )


def not_yours(tools: Sequence[str]) -> str:
    return f"You may not decide {_tools(tools)}, so nothing was recorded for any call of this run."


def changed(tools: Sequence[str]) -> str:
    return (
        f"{_tools(tools)} changed or was decided since the "
        "list was shown, so nothing was recorded. Look again at the cards."
    )


OWN_CALLS = (
    "You asked for these, so someone else has to approve them; you may still reject them "
    "(Reject all). Nothing was recorded."
)
"""**Approve all** by the requester, said before the modal (the card's Approve says it too)."""


def done(count: int, approving: bool) -> str:
    """ "Approved both calls.", "Rejected the 3 calls."."""
    verb = "Approved" if approving else "Rejected"
    return f"{verb} both calls." if count == 2 else f"{verb} the {count} calls."
