"""The audit trail reviewed: a proposed policy's backtest and check, and how decisions go.

Floor 7 (processes and the CLI): may import every floor below.
"""

from runtime.review.stats import ChannelStats, decision_stats, most, tool_table

__all__ = [
    "ChannelStats",
    "decision_stats",
    "most",
    "tool_table",
]
