"""Calls waiting for people: copies, reminders, escalation, expiry, what waits.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.waiting.index import Listed, OpenApproval, WaitingIndex

_WHERE = {
    "Listed": "index",
    "WaitingIndex": "index",
    "OpenApproval": "index",
}
__all__ = ["Listed", "OpenApproval", "WaitingIndex"]

__getattr__ = lazy_names(__name__, _WHERE)
