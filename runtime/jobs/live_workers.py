"""Which workers are alive: on a cluster, a worker scans for a dead one's jobs only when one died.

A worker takes over the jobs of one that stopped heartbeating (`XAUTOCLAIM`, `runtime.jobs.queue`).
Scanning for them is one command per shard, every third of the idle timeout: on a cluster of 16
shards, 1.6 commands a second per idle worker that nearly always find nothing. Instead each
worker says it is alive in one sorted set (its name, scored by when), read by every worker in
the same round trip: the shards are scanned while some worker is overdue, and otherwise only
every `FULL_SCAN_SECONDS`.

Correctness does not rest on this set: what may be taken over is still decided by Redis's idle
time of each job, so a scan too many finds nothing and costs a command per shard. What the set
decides is how soon a dead worker's jobs are found. A worker writes its mark right after its
jobs' heartbeat, so by the time its mark is `overdue_after` old, every job it heartbeated is
past the idle timeout; a job it read after its last mark goes quiet at most one heartbeat
interval later, which the scans while it stays overdue (`forget_after`) cover. Marks use each
worker's own clock: a clock off by seconds only moves the scans by as much. Jobs of a worker
that never wrote a mark (an older version, during a deploy) are found by the full scans.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

FULL_SCAN_SECONDS = 120.0
"""The longest between two scans of every shard, overdue worker or not."""
MARGIN_SECONDS = 2.0
"""Added to the idle timeout before a worker counts as overdue: its mark follows its heartbeat
by a round trip, and clocks differ by a little."""


@dataclass(kw_only=True)
class LiveWorkers:
    redis: aioredis.Redis
    key: str
    """One sorted set for all workers (`Keys.live_workers`)."""
    idle_timeout: float
    """`JOB_IDLE_TIMEOUT_SECONDS`: how long a job of a silent worker stays its own."""

    @property
    def overdue_after(self) -> float:
        return self.idle_timeout + MARGIN_SECONDS

    @property
    def forget_after(self) -> float:
        """Overdue this long, a worker's every job is past the idle timeout and was scanned for
        a few times: its mark goes (a worker that was only slow writes it again)."""
        return 2 * self.idle_timeout + MARGIN_SECONDS

    async def beat(self, consumer: str) -> bool:
        """Mark `consumer` alive now; whether some other worker is overdue (scan the shards)."""
        now = time.time()
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zadd(self.key, {consumer: now})
            pipe.zrangebyscore(self.key, "-inf", now - self.overdue_after, withscores=True)
            _, overdue = await pipe.execute()
        late: list[tuple[Any, float]] = overdue
        forgotten = [name for name, at in late if at < now - self.forget_after]
        if forgotten:
            await self.redis.zrem(self.key, *forgotten)
        return bool(late)

    async def left(self, consumer: str, *, handed_back: int) -> None:
        """`consumer` stopped. With jobs handed back, its mark is made overdue at once, so that
        the others scan for them now instead of after the idle timeout."""
        if handed_back:
            await self.redis.zadd(self.key, {consumer: time.time() - self.overdue_after - 1})
        else:
            await self.redis.zrem(self.key, consumer)


def consumer_name() -> str:
    """The dyno (`worker.1`) or host and pid, plus a suffix of this boot's own (`worker.1:3f9a1c`).

    In a deploy Heroku starts the new `worker.1` before the old one has stopped: with one name
    between them, the old one's hand-back on SIGTERM would give away the new one's jobs.
    """
    where = os.environ.get("DYNO") or f"{socket.gethostname()}:{os.getpid()}"
    return f"{where}:{secrets.token_hex(3)}"
