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
    EXPIRED = "expired"
    DENIED = "denied"
    """A click refused because the person may not decide (collapsed per person and call)."""
    RESUMED = "resumed"
    REFUSED = "refused"
    """An approved call whose arguments changed before it ran."""
    EXECUTED = "executed"
    REPLAYED = "replayed"
    """A retried step reached a call that had already run: its recorded output was reused."""
    ESCALATED = "escalated"
    """A call still undecided was escalated: more people may decide it (the escalation script
    writes it as it widens the call's gate)."""
    STOPPED = "stopped"
    """Someone stopped the run (written by the stop script when they asked)."""
    FINISHED = "finished"
    FAILED = "failed"
