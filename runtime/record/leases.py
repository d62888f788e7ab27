"""A delivery's hold on a run: the lease its writes carry, its claim, and the error a write
gets once a later delivery claimed the run (fencing: `runtime.record.layout`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal


class Fenced(Exception):
    """A later delivery of this run's job claimed the run: this one must stop writing."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id}: another delivery of its job took over")
        self.run_id = run_id


@dataclass(frozen=True, kw_only=True, slots=True)
class Lease:
    """One delivery's hold on a run: its writes carry the fence."""

    run_id: str
    fence: int


ClaimStatus = Literal[
    "claimed",
    "taken_over",
    "stale",
    "gone",
    "running",
    "waiting",
    "finishing",
    "failed",
    "ready",
    "stopped",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Claim:
    status: ClaimStatus
    lease: Lease | None = None
    hash: Mapping[str, bytes] | None = None
    """A resume's: the run's hash as the claim left it (read in the same step), to load the
    run from; None when the reply did not carry it (a copy of the call), to be read."""
