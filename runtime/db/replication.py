"""Waiting for replicas before anything is acknowledged (`REDIS_MIN_REPLICAS`, `REDIS_WAIT_MS`).

Redis replicates asynchronously: a primary that dies a moment after a write takes the write with
it, and Sentinel promotes a replica that never saw it. A decision acknowledged to Slack, or a job
acknowledged to the stream, must not be such a write. After the write, `confirm()` issues
`WAIT N ms` and raises `NotReplicated` when fewer than N replicas have everything written so
far; the callers treat that like any Redis failure (the person is asked to try again, a job is
retried), and the write stays on the primary, where a retry finds it.

`WAIT` counts replicas that acknowledged the *calling connection's* last write, and a pooled
client's next command may go out on another connection than the write did. So `confirm()`
first sends a `PUBLISH` on the same connection: outside Redis Cluster it is propagated to the
replicas like a write, without touching a key, which moves that connection's offset past every
write made before it, on any connection. Both go in one round trip.

A confirmation also says nothing of writes made on *another* primary: a worker's job that wrote
to a primary which then died, and carried on against the promoted replica (its next command
simply reconnected), would otherwise confirm, and acknowledge, work that was lost with the old
one. So each attempt of a job first pins the primary it writes to (its replication id, which a
promotion changes); `confirm()` in that attempt then raises `PrimaryChanged` if the primary is
another one, and the job runs again there before anything is shown or acknowledged.

With `REDIS_MIN_REPLICAS=0` (the default) `confirm()` and `pin()` send nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.db.keys import Keys


class NotReplicated(RedisError):
    """Fewer replicas than `REDIS_MIN_REPLICAS` confirmed the writes within `REDIS_WAIT_MS`.

    The writes are on the primary (a retry finds them) but could be lost if it failed now.
    A `RedisError`, so every path that handles an unreachable Redis handles this one too.
    """

    def __init__(self, confirmed: int, wanted: int, wait_ms: int) -> None:
        super().__init__(f"{confirmed} of {wanted} replica(s) confirmed within {wait_ms} ms")
        self.confirmed = confirmed
        self.wanted = wanted
        self.wait_ms = wait_ms


class PrimaryChanged(NotReplicated):
    """The primary is not the one this attempt of a job began on (`Replication.pin`): a failover
    promoted a replica, and what the attempt wrote before it may have died with the old primary.
    The job runs again on the new one (its steps redo what is missing) before it shows anything
    or is acknowledged."""

    def __init__(self, wait_ms: int) -> None:
        RedisError.__init__(
            self, "the Redis primary changed (a failover) while this job ran; it runs again"
        )
        self.confirmed = 0
        self.wanted = 0
        self.wait_ms = wait_ms


_PINNED: ContextVar[str | None] = ContextVar("pinned_primary", default=None)
"""The replication id of the primary the current attempt of a job writes to; None outside jobs
(a web request writes and confirms in one step)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Replication:
    redis: aioredis.Redis | None = None
    """None: confirm nothing (no replicas asked for)."""
    channel: str = ""
    """What `PUBLISH` names; nobody listens to it (`Keys.replication_probe`)."""
    min_replicas: int = 0
    wait_ms: int = 500

    @classmethod
    def of(
        cls, redis: aioredis.Redis, keys: Keys, *, min_replicas: int, wait_ms: int
    ) -> Replication:
        if min_replicas == 0:
            return NO_REPLICAS
        return cls(
            redis=redis,
            channel=keys.replication_probe,
            min_replicas=min_replicas,
            wait_ms=wait_ms,
        )

    @property
    def waits(self) -> bool:
        return self.redis is not None and self.min_replicas > 0

    async def primary(self) -> str | None:
        """The current primary's replication id; None when no replicas are asked for."""
        if self.redis is None or self.min_replicas == 0:
            return None
        return _replication_id(await self.redis.info("replication"))

    @staticmethod
    def pin(primary: str | None) -> None:
        """Remember `primary` as the one that this attempt of a job (the current asyncio task
        and the tasks it starts) writes to, for `confirm()` to check."""
        _PINNED.set(primary)

    @staticmethod
    def pinned() -> str | None:
        return _PINNED.get()

    async def confirm(self, *, pinned: bool = True) -> None:
        """Return once `min_replicas` replicas have every write made so far; else raise
        `NotReplicated` (after `wait_ms`), `PrimaryChanged` (in a job pinned to another primary,
        unless not `pinned`: a write known to have gone to the new one) or a `RedisError`."""
        if self.redis is None or self.min_replicas == 0:
            return
        pinned_to = _PINNED.get() if pinned else None
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.publish(self.channel, b"")
            pipe.execute_command("WAIT", self.min_replicas, self.wait_ms)
            if pinned_to is not None:
                # On the same connection, so on the server that answered the WAIT.
                pipe.info("replication")
            _received, confirmed, *info = await pipe.execute()
        if pinned_to is not None and _replication_id(info[0]) != pinned_to:
            raise PrimaryChanged(self.wait_ms)
        if int(confirmed) < self.min_replicas:
            raise NotReplicated(int(confirmed), self.min_replicas, self.wait_ms)


def _replication_id(info: Any) -> str:
    """A primary's replication id: a replica promoted to primary takes a new one."""
    return str(info.get("master_replid", ""))


NO_REPLICAS = Replication()
