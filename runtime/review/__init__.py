"""The audit trail reviewed: a proposed policy's backtest and check, and how decisions go.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.review.stats import ChannelStats, decision_stats, most, tool_table

_WHERE = {
    "ChannelStats": "stats",
    "decision_stats": "stats",
    "most": "stats",
    "tool_table": "stats",
}
__all__ = ["ChannelStats", "decision_stats", "most", "tool_table"]

__getattr__ = lazy_names(__name__, _WHERE)
