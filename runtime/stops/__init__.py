"""Stopping a run: the stop script, who stopped it, and hearing of it while a step runs."""

from runtime.stops.stopper import Principals, RunStopper, StopResult, StopView

__all__ = [
    "Principals",
    "RunStopper",
    "StopResult",
    "StopView",
]
