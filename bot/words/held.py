"""The words of **Check what comes back**: a tool's output held for a person before the agent
reads it (`runtime.journal.held`). Part of `bot.words.runs`, kept apart only for size."""

from __future__ import annotations

from bot.words.runs import escape, user
from runtime.record import Decision

RELEASE = "Release"
EDIT_AND_RELEASE = "Edit and release"
WITHHOLD = "Withhold"
VIEW_OUTPUT = "View full output"

WITHHOLD_TITLE = "Withhold output"
WITHHOLD_SUBMIT = "Withhold"
WITHHOLD_CANCEL = "Cancel"
WITHHOLD_LABEL = "Why? The agent reads this instead of the output."
WITHHOLD_PLACEHOLDER = "e.g. It holds customers' card numbers; ask for the order status only."
OUTPUT_TITLE = "Held output"
EDIT_TITLE = "Edit and release"
EDIT_SUBMIT = "Release"
EDIT_CANCEL = "Cancel"
EDIT_LABEL = "The output the agent reads"

HELD_ON_CARD = (
    "A held output is released or withheld on its card in the run's thread, where it is shown, "
    "so nothing was recorded here."
)


def held_headline(tool: str) -> str:
    """The first line of the card of a held output: the tool ran, the agent has not read it."""
    return (
        f":mag: `{escape(tool)}` ran. Its output is held: the agent reads it only once a person "
        "releases it."
    )


def output_shortened(shown: int, total: int) -> str:
    return f"Output shortened: {shown:,} of {total:,} characters shown"


def withhold_context(tool: str, requester: str | None) -> str:
    asked = f", requested by {user(requester)}" if requester else ""
    return (
        f"Withholding the output of `{escape(tool)}`{asked}. The agent never reads it: it "
        "reads that you withheld it, and your reason."
    )


def edit_context(tool: str, requester: str | None) -> str:
    asked = f", requested by {user(requester)}" if requester else ""
    return (
        f"Editing the output of `{escape(tool)}`{asked}. The agent reads what you release here "
        "instead of the output; the audit trail keeps the digests of both."
    )


def held_decision_headline(decision: Decision, tool: str) -> str:
    """The first line of a held output's card once decided."""
    name = f"`{escape(tool)}`"
    who = user(decision.user_id) if decision.user_id else "Someone"
    if decision.outcome in ("approved", "approved_always"):
        return f":white_check_mark: {who} released the output of {name}: the agent reads it"
    if decision.outcome == "rejected":
        reason = escape((decision.reason or "").strip())
        return f":no_entry_sign: {who} withheld the output of {name}" + (
            f": {reason}" if reason else ""
        )
    if decision.outcome == "answered":
        return f":pencil2: {who} edited the output of {name} and released the edit"
    if decision.outcome == "stopped":
        return f":no_entry: Stopped by {who}; the output of {name} was not released"
    return f":hourglass: Nobody released the output of {name} in time: it was withheld"
