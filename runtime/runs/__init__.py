"""Running a run's steps with the SDK: planning approvals, applying decisions, observing, ending.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.runs.live import LiveRun, LiveRuns

_WHERE = {
    "LiveRun": "live",
    "LiveRuns": "live",
}
__all__ = ["LiveRun", "LiveRuns"]

__getattr__ = lazy_names(__name__, _WHERE)
