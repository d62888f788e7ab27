"""Watching which Redis primary a process talks to, to find what a failover lost.

One loop per process (the web's and each worker's). At start it reads the primary's identity
(`runtime.failover.identity`) once: where nothing can fail over (no Sentinel, no replica, no
`REDIS_MIN_REPLICAS`) it stops there, and where something can but `REDIS_MIN_REPLICAS=0`, it
logs one line saying what a failover can lose. Otherwise, while a `Guard` remembers a recent
write (nothing while idle), it reads the identity every `POLL_SECONDS` (through Sentinel, after
asking Sentinel which server is primary) and hands it to each guard, which stamps its new
entries and looks up on a new primary those that the ids do not prove were carried over
(`runtime.failover.recent`).

A primary the watch has moved away from is never trusted again: a connection still open to it
(not yet demoted) would otherwise answer that every write is there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol

import redis.asyncio as aioredis
from redis.asyncio.sentinel import SentinelConnectionPool
from redis.exceptions import RedisError

from runtime.failover.identity import Primary, read_primary
from runtime.process.backoff import Backoff
from runtime.process.shutdown import Shutdown
from runtime.settings import RuntimeSettings

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
"""How often the identity is read while something is remembered: how soon a lost write is
found once the new primary is reachable."""
RETIRED_KEPT = 16
UNPROTECTED = (
    "REDIS_MIN_REPLICAS=0 with a replicated Redis (%s): a failover can lose what was "
    "acknowledged in its last moments (decisions, started runs, tools' results). The processes "
    "look for it afterwards and say what is gone (a lost decision's card comes back, a tool's "
    "result is written back), but only REDIS_MIN_REPLICAS=1 prevents the loss"
)


class Guard(Protocol):
    """Recent writes of one kind (`runtime.failover.recent.Recent`)."""

    noted: asyncio.Event

    def watching(self) -> bool: ...

    def switch_off(self) -> None: ...

    async def settle(self, primary: Primary, *, read_at: float, changed_at: float) -> None: ...

    async def seed(self, redis: aioredis.Redis) -> None:
        """At start: remember what the primary itself says was written lately (a web process
        started after the one that acknowledged it)."""


class PrimaryWatch:
    name = "primary watch"

    def __init__(
        self,
        redis: aioredis.Redis,
        guards: Sequence[Guard],
        *,
        sentinel: bool,
        min_replicas: int,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self._redis = redis
        self._guards = guards
        self._sentinel = sentinel
        self._min_replicas = min_replicas
        self._poll_seconds = poll_seconds
        self._stopping = Shutdown()
        self.primary: Primary | None = None
        self._retired: list[str] = []
        self._changed_at = float("-inf")

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        first = await self._first_read()
        if first is None:
            return
        if not (self._sentinel or first.replicas or self._min_replicas):
            for guard in self._guards:
                guard.switch_off()  # one server: nothing to fail over to
            return
        if self._min_replicas == 0:
            what = "Sentinel" if self._sentinel else f"{first.replicas} replica(s)"
            log.warning(UNPROTECTED, what)
        self.primary = first
        for guard in self._guards:
            await self._seed(guard)
        while not self._stopping.is_set():
            if not any(guard.watching() for guard in self._guards):
                await self._until_noted()
                continue
            await self.tick()
            await self._stopping.sleep(self._poll_seconds)

    async def tick(self) -> None:
        """Read the primary once and let each guard settle against it."""
        read_at = time.monotonic()
        try:
            pool = self._redis.connection_pool
            if isinstance(pool, SentinelConnectionPool):
                # Sentinel's word first (one command): it moves the pool to a new primary at
                # once, where a connection still open to the old one would answer for it until
                # that one is demoted, up to ten seconds after a partition heals.
                await pool.get_master_address()  # type: ignore[no-untyped-call]
            primary = await read_primary(self._redis)
        except RedisError:
            return  # away: the next tick reads again
        if not primary.is_primary or primary.replid in self._retired:
            # A replica, or a primary left behind, answered on a connection opened before the
            # failover: drop the idle ones, so the next are opened where Sentinel says.
            await self._redis.connection_pool.disconnect(inuse_connections=False)
            return
        before = self.primary
        if before is not None and primary.replid != before.replid:
            self._retire(before.replid)
            self._changed_at = read_at
            follows = "promoted in its place" if primary.succeeds(before.replid) else "another"
            log.warning(
                "the Redis primary changed (%s, %s): looking for what was acknowledged lately",
                primary.replid[:8],
                follows,
            )
        self.primary = primary
        for guard in self._guards:
            await guard.settle(primary, read_at=read_at, changed_at=self._changed_at)

    def _retire(self, replid: str) -> None:
        self._retired = [*self._retired, replid][-RETIRED_KEPT:]

    async def _first_read(self) -> Primary | None:
        """The primary's identity once Redis answers (None if stopping first)."""
        backoff = Backoff(self._poll_seconds, 30.0)
        while not self._stopping.is_set():
            try:
                return await read_primary(self._redis)
            except RedisError:
                pass  # said by the process's own wait for Redis
            if await self._stopping.sleep(backoff.failed()):
                break
        return None

    async def _seed(self, guard: Guard) -> None:
        try:
            await guard.seed(self._redis)
        except RedisError as error:
            log.warning(
                "recent decisions not read at start (%s): a failover soon after this start "
                "is watched for this process's own decisions only",
                error,
            )

    async def _until_noted(self) -> None:
        waits = [asyncio.ensure_future(guard.noted.wait()) for guard in self._guards]
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait([*waits, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in (*waits, stop):
                waiting.cancel()


def watch_for(
    settings: RuntimeSettings, redis: aioredis.Redis, guards: Sequence[Guard]
) -> list[PrimaryWatch]:
    """The process's watch over `guards`; none on a Redis Cluster, which fails over node by
    node on its own (its nodes' ids are not watched)."""
    if settings.redis_cluster:
        return []
    watch = PrimaryWatch(
        redis,
        guards,
        sentinel=bool(settings.redis_sentinels),
        min_replicas=settings.redis_min_replicas,
    )
    return [watch]
