"""What a Redis failover lost, found and said: the primary's identity watched, and the decisions
and tool outputs a process acknowledged lately looked for again on the new primary.

Floor 5 (a call's actions): imports the record (and its `reporter`) and the floors below.
"""

from __future__ import annotations

from runtime.failover.calls import RecentCalls
from runtime.failover.decisions import (
    Acknowledged,
    AcknowledgedDecisions,
    LostDecision,
    LostDecisionReport,
)
from runtime.failover.identity import Primary, read_primary
from runtime.failover.watch import PrimaryWatch, watch_for

__all__ = [
    "Acknowledged",
    "AcknowledgedDecisions",
    "LostDecision",
    "LostDecisionReport",
    "Primary",
    "PrimaryWatch",
    "RecentCalls",
    "read_primary",
    "watch_for",
]
