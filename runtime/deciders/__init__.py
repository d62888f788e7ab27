"""Who may decide a call: one answer, given the same way the decision script gives it.

Pure: imports nothing else of `runtime`, so every floor above may ask it.
"""

from runtime.deciders.deciders import (
    Approvers,
    Deciders,
    Refusal,
    is_group,
    may_decide,
    needs_groups,
    refusal,
)

__all__ = [
    "Approvers",
    "Deciders",
    "Refusal",
    "is_group",
    "may_decide",
    "needs_groups",
    "refusal",
]
