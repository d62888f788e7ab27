"""A delivery's hold on a run: the lease its writes carry, its claim, and the error a write
gets once a later delivery claimed the run (fencing: `runtime.record.layout`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from runtime.record import layout as rr


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


def claimed_hash(reply: list[Any], lease: Lease) -> dict[str, bytes] | None:
    """The hash a resume's claim read (its reply's fifth element, field, value, ...), with the
    fence and status the claim wrote; None when the reply has none."""
    if len(reply) < 5 or not isinstance(reply[4], list):
        return None
    flat = reply[4]
    found: dict[str, bytes] = {
        (name.decode() if isinstance(name, bytes) else str(name)): flat[i + 1]
        for i in range(0, len(flat) - 1, 2)
        if (name := flat[i]) is not None
    }
    found[rr.FENCE] = str(lease.fence).encode()
    found[rr.STATUS] = b"resuming"
    return found
