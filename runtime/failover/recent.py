"""What a process wrote lately, remembered for a bounded time, to be found again after a failover.

Redis acknowledges a write before its replicas have it; with `REDIS_MIN_REPLICAS=0` a primary
that fails a moment later (or is cut off by a partition while it goes on acknowledging) takes
such writes with it. Each entry here is one write that a person or a job was told of (a
decision, a tool's recorded output), with the primary it is known to be on (`seen_on`) and the
offset of that primary's stream by which it was written (`offset`). On each tick of the
`PrimaryWatch` an entry is:
- stamped with the primary of that tick, when it was noted since the last one and the primary
  has not changed meanwhile (the write went there, and the offset read after it covers it);
- carried over to a promoted primary that holds the old one's stream up to its offset
  (`Primary.holds`: nothing to look up);
- otherwise looked up on the new primary (`look`, one round trip), and there either found
  (stamped again) or handled as lost by the owner (`runtime.failover.decisions`,
  `runtime.failover.calls`).

Bounded: an entry is kept `seconds` after it was noted (a partition that lasts longer loses it
unseen), at most `most` entries (the oldest go first), and each tick looks up at most
`LOOKS_PER_TICK` of them.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.failover.identity import Primary

LOOKS_PER_TICK = 50
"""Entries looked up on a new primary per tick (a round trip each); the rest wait a tick."""
SETTLING_SECONDS = 30.0
"""After a change of primary, new entries are looked up rather than stamped for this long: a
connection still open to the old primary (not yet demoted) may have taken a write that the
tick's own `INFO`, on another connection, does not see."""


@dataclass(kw_only=True, slots=True)
class Written:
    """Where one write is known to be."""

    noted: float
    """`time.monotonic()` when it was acknowledged."""
    seen_on: str | None = None
    """The replication id of a primary known to hold it; None: not known yet."""
    offset: int = 0
    """An offset of `seen_on`'s stream by which it was written."""


E = TypeVar("E", bound=Written)
K = TypeVar("K")


class Recent(ABC, Generic[K, E]):
    """Entries by key, oldest first; see the module docstring."""

    def __init__(self, *, seconds: float, most: int) -> None:
        self.seconds = seconds
        self.most = most
        self.entries: OrderedDict[K, E] = OrderedDict()
        self.on = True
        """False once the watch found nothing that can fail over: nothing is remembered."""
        self.noted = asyncio.Event()
        """Set at each entry: the watch wakes from idling."""
        self._settled_at = float("-inf")

    def remember(self, key: K, entry: E) -> None:
        if not self.on:
            return
        self.forget(key)
        self.entries[key] = entry
        self.kept(entry)
        while len(self.entries) > self.most:
            self.forget(next(iter(self.entries)))
        self.noted.set()

    def forget(self, key: K) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.dropped(entry)

    def kept(self, entry: E) -> None:
        """Called for each entry remembered (for an owner that counts what they hold)."""

    def dropped(self, entry: E) -> None:
        """Called for each entry forgotten, whatever the reason."""

    async def seed(self, redis: aioredis.Redis) -> None:
        """At start: what the primary says was written lately, for an owner that can tell."""

    def switch_off(self) -> None:
        self.on = False
        for key in list(self.entries):
            self.forget(key)

    def watching(self) -> bool:
        """Whether anything is still remembered (entries past their time are dropped)."""
        oldest = time.monotonic() - self.seconds
        while self.entries:
            key, entry = next(iter(self.entries.items()))
            if entry.noted >= oldest:
                return True
            self.forget(key)
        self.noted.clear()
        return False

    async def settle(self, primary: Primary, *, read_at: float, changed_at: float) -> None:
        """One tick: stamp, carry over or look up each entry not known to be on `primary` (see
        the module docstring). `read_at`: the monotonic time just before `primary` was read
        (only an entry noted before it is covered by its offset); `changed_at`: when the watch
        last saw the primary change."""
        looks = 0
        for key, entry in list(self.entries.items()):
            if entry.seen_on == primary.replid:
                continue
            settled = changed_at + SETTLING_SECONDS < entry.noted < read_at
            if entry.seen_on is None and settled:
                entry.seen_on, entry.offset = primary.replid, primary.offset
                continue
            if entry.seen_on is None and entry.noted >= read_at:
                continue  # the next tick's read covers it
            if primary.holds(entry.seen_on, entry.offset):
                entry.seen_on = primary.replid
                continue
            if looks == LOOKS_PER_TICK:
                break
            looks += 1
            try:
                found = await self.look(key, entry, primary)
            except RedisError:
                return  # away again: the next tick looks once more
            if found is not None and key in self.entries:
                entry.seen_on, entry.offset = primary.replid, found

    @abstractmethod
    async def look(self, key: K, entry: E, primary: Primary) -> int | None:
        """Find `entry` on `primary`: its offset there when it is there (or was restored);
        None when the answer came from another server (looked up again next tick). An entry
        found lost is handled here (said, restored or forgotten)."""
