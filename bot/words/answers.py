"""The words of **Answer instead** and **Approve with a note…**: a person speaking to the
agent at a call, in the tool's place or beside its output. Part of `bot.words.runs`, kept apart
only for size."""

from __future__ import annotations

from bot.words.runs import escape, user
from runtime.record import Approval

ANSWER_INSTEAD = "Answer instead"
APPROVE_WITH_NOTE = "Approve with a note…"

ANSWER_TITLE = "Answer instead"
ANSWER_SUBMIT = "Answer"
ANSWER_CANCEL = "Cancel"
ANSWER_LABEL = "What should the agent read as this call's result?"
ANSWER_PLACEHOLDER = "e.g. Refunded by hand in the billing console; no need to retry."
ANSWER_REQUIRED = "Please write the answer the agent should read."
ANSWER_CHARS = 2000

NOTE_TITLE = "Approve with a note"
NOTE_SUBMIT = "Approve"
NOTE_CANCEL = "Cancel"
NOTE_LABEL = "Your note: the agent reads it after the tool's output."
NOTE_PLACEHOLDER = "e.g. Only this once; ask the on-call next time."
NOTE_REQUIRED = "Please write the note, or use Approve."
NOTE_CHARS = 500

ANSWER_NOT_OFFERED = (
    "The policy does not allow answering in place of this tool, so nothing was recorded. "
    "Approve or reject it."
)


def answer_context(agent: str, tool: str, requester: str | None) -> str:
    """At the top of the modal, named as the card names them: the tool does not run."""
    asked = f"requested by {user(requester)} for" if requester else "requested for"
    return (
        f"Answering for `{escape(tool)}`, {asked} *{escape(agent)}*. The tool does not run: "
        "the agent reads your answer as its result, and knows you gave it."
    )


def note_context(agent: str, tool: str, requester: str | None) -> str:
    asked = f"requested by {user(requester)} for" if requester else "requested for"
    return (
        f"Approving `{escape(tool)}`, {asked} *{escape(agent)}*, as Approve does. Once it has "
        "run, the agent reads its output followed by your note."
    )


def note_lines(approvals: tuple[Approval, ...]) -> list[str]:
    """Under an approved card: each approver's note ("Note from @alice: …"), in order."""
    return [f"Note from {user(a.user_id)}: {escape(a.note)}" for a in approvals if a.note]
