"""The audit trail reviewed: a proposed policy's backtest and check, and how decisions go.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.review.stats import ChannelStats, decision_stats, most, tool_table

_WHERE = {
    "ChannelStats": "stats",
    "decision_stats": "stats",
    "most": "stats",
    "tool_table": "stats",
}
__all__ = ["ChannelStats", "decision_stats", "most", "tool_table"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
