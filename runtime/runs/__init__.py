"""Running a run's steps with the SDK: planning approvals, applying decisions, observing, ending."""

from runtime.runs.live import LiveRun, LiveRuns

__all__ = [
    "LiveRun",
    "LiveRuns",
]
