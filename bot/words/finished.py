"""What a click on a run that has already finished is told (the decision script's `finished`:
the run is gone and its tombstone stays). The click may be a late copy of one that decided
(redis-py sends a timed-out call again): the words claim nothing either way about what was
recorded, and point to the card, which the run's resume redrew with how each call ended."""

from __future__ import annotations

RUN_FINISHED = (
    "This approval is not open: its run has already finished. Its card shows how each of its "
    "calls ended."
)
