"""A tool's output held for a person before the model reads it (**Check what comes back**).

A call whose rule says `review_output` (or whose `review_output_when` holds: `runtime.policy`)
runs once, as approved. Its output is then journaled marked `held`, in the same write that
makes any retry reuse it instead of running the tool again (`runtime.journal.invoker`), and the
journal raises `OutputHeld` instead of returning it: the model has not read it. The run stops
for one more round in which the call asks again (`runtime.runs.held_outputs`), on a card that
shows the output with **Release** and **Withhold**: an approval like any other (the call's own
gate, quorum, decision script and audit trail), whose digest binds the held output
(`held_digest`), so a decision covers exactly the output that was shown. **Edit and release**
is an answer on that gate: the model reads the person's edited output in the tool's place, and
the audit entry keeps both digests (the held output's and the edited one's).

On the resume the SDK asks for the call again and the journal answers from the held entry: the
output once a person released it; a withheld one never reaches the tool's place (the call is
rejected in the restored state with `withheld_message`). A held entry found without a release,
whatever the path, raises `OutputHeld` again: the output never reaches the model unreleased.

`OutputHeld` is an `OutcomeLost` (the run stops for a person on one call that has run), so it
travels the same way: past the SDK's tool error handling, out of the round.
"""

from __future__ import annotations

import hashlib
import json

from runtime.record.envelope import Decision, PendingCall, RunEnvelope
from runtime.record.starts import OutcomeLost

HELD_MARK = "held"
"""The journal entry's field that marks its output held."""
HELD_OUTCOME = "(held for a person to review)"
"""The `executed` audit entry's outcome for a held output, which stays out of the trail."""
HELD_CHARS = 20_000
"""The most of a held output the card's full text shows (the digest binds all of it)."""
EDITABLE_CHARS = 2000
"""The longest held output **Edit and release** offers to edit: what its modal holds (the
answer modal's, `bot.words.answers.ANSWER_CHARS`)."""


class OutputHeld(OutcomeLost):
    """A call ran and its output is held for a person; `digest` binds `output`."""

    def __init__(self, run_id: str, call_id: str, tool: str, output: str, digest: str) -> None:
        super().__init__(run_id, call_id, tool)
        self.args = (f"run {run_id}: the output of {tool} ({call_id}) is held for a person",)
        self.output = output
        self.digest = digest
        self.resume_state: str | None = None
        self.resume_calls: tuple[PendingCall, ...] = ()
        """Where the output waits when the round it ran in asked nobody: that round's state
        and calls (`runtime.runs.held_outputs.held_in`); unset: the run's saved round."""


def output_text(output: object) -> str:
    """A journaled output as people read it: text as it is, anything else as JSON."""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def held_digest(call_digest: str, output: object) -> str:
    """What a decision on a held output binds: the call (its approved digest) and its output."""
    canonical = json.dumps([call_digest, output_text(output)], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def released_calls(envelope: RunEnvelope) -> frozenset[str]:
    """Call ids of the round whose held output a person released."""
    return frozenset(
        call.call_id
        for call in envelope.calls
        if call.held is not None
        and call.decision is not None
        and call.decision.outcome in ("approved", "approved_always")
    )


def reviewed_calls(envelope: RunEnvelope) -> set[str]:
    """Call ids of the round whose output is held once their tool has run."""
    return {c.call_id for c in envelope.calls if c.review_output and c.held is None}


def withheld_message(decision: Decision, tool: str) -> str:
    """What the model reads in place of an output a person withheld (or nobody released)."""
    if decision.outcome == "answered":  # **Edit and release**: the edited output, as it is
        return decision.answer or ""
    if decision.outcome == "expired" or decision.user_id is None:
        return (
            f"`{tool}` ran, but its output was withheld: nobody released it in time. Tell the "
            "user it ran and that its output was not shown to you."
        )
    who = f"@{decision.user_name or decision.user_id}"
    reason = (decision.reason or "").strip() or "no reason given"
    return f"`{tool}` ran, but the output was withheld by {who}: {reason}"
