"""The names of audit events: one enum for Python and for the Lua scripts (passed as arguments)."""

from __future__ import annotations

from enum import StrEnum


class AuditEvent(StrEnum):
    STARTED = "started"
    REQUESTED = "requested"
    AUTO_APPROVED = "auto_approved"
    AUTO_REJECTED = "auto_rejected"
    APPROVED = "approved"
    APPROVED_ALWAYS = "approved_always"
    REJECTED = "rejected"
    ANSWERED = "answered"
    """A person answered in the tool's place (**Answer instead**): it did not run; the entry
    keeps the digest, and the answer as `AUDIT_ARGS` says."""
    EXPIRED = "expired"
    DENIED = "denied"
    """A click refused because the person may not decide (collapsed per person and call)."""
    RESUMED = "resumed"
    REFUSED = "refused"
    """An approved call whose arguments changed before it ran."""
    EXECUTED = "executed"
    REPLAYED = "replayed"
    OUTCOME_LOST = "outcome_lost"
    """A retried step reached a call that started but has no recorded outcome: it was not run
    again, and asks a person (`runtime.runs.lost_outcomes`)."""
    """A retried step reached a call that had already run: its recorded output was reused."""
    OUTPUT_HELD = "output_held"
    """A call ran and its output is held for a person (`runtime.journal.held`)."""
    OUTPUT_RELEASED = "output_released"
    """A person released a held output: the model reads it (written by the decision script)."""
    OUTPUT_EDITED = "output_edited"
    """A person edited a held output and released the edit: the entry keeps both digests."""
    OUTPUT_WITHHELD = "output_withheld"
    """A person withheld a held output, or nobody released it in time: the model reads why."""
    GRANTED = "granted"
    """An approval that also allowed later calls for a while (a grant, `runtime.grants.store`)."""
    GRANT_USED = "grant_used"
    """A call approved by a grant, without a card."""
    REVOKED = "revoked"
    """A grant ended by a person before its time."""
    EDITED = "edited"
    """A person changed a call's arguments and approved the edited call."""
    REGATED = "regated"
    """An edit moved a call under a stricter rule: it was not approved, and the call now asks
    that rule's approvers (written with the `edited` entry by the decision script)."""
    ESCALATED = "escalated"
    """A call still undecided was escalated: more people may decide it (the escalation script
    writes it as it widens the call's gate)."""
    STOPPED = "stopped"
    """Someone stopped the run (written by the stop script when they asked)."""
    FINISHED = "finished"
    FAILED = "failed"
