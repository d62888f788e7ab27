"""Calls waiting for people: what they were promised, copies, reminders, escalation, what waits.

Floor 5 (a call's actions): imports the rules, the record and the floors below.
"""

from runtime.waiting.index import Listed, OpenApproval, WaitingIndex

__all__ = [
    "Listed",
    "OpenApproval",
    "WaitingIndex",
]
