"""Running a run's steps with the SDK: the job routed to it, planning approvals, applying
decisions, asking about lost outcomes, posting and observing, ending.

Floor 6 (a run): imports `mcp` and `runtime.registry` beside it, and every floor below.
"""

from runtime.runs.live import LiveRun, LiveRuns

__all__ = [
    "LiveRun",
    "LiveRuns",
]
