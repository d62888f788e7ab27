"""Stopping a run: the stop script, and hearing of it while a step runs (its safe points).

Floor 5 (a call's actions): imports `journal` beside it, and the floors below.
"""

from runtime.stops.stopper import Principals, RunStopper, StopResult, StopView

__all__ = [
    "Principals",
    "RunStopper",
    "StopResult",
    "StopView",
]
