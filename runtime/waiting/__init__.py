"""Calls waiting for people: copies, reminders, escalation, expiry, what waits."""

from runtime.waiting.index import Listed, OpenApproval, WaitingIndex

__all__ = [
    "Listed",
    "OpenApproval",
    "WaitingIndex",
]
