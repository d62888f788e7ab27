"""Stopping a run: the stop script, who stopped it, and hearing of it while a step runs.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.stops.stopper import Principals, RunStopper, StopResult, StopView

_WHERE = {
    "Principals": "stopper",
    "RunStopper": "stopper",
    "StopResult": "stopper",
    "StopView": "stopper",
}
__all__ = ["Principals", "RunStopper", "StopResult", "StopView"]

__getattr__ = lazy_names(__name__, _WHERE)
