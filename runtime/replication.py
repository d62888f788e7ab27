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

With `REDIS_MIN_REPLICAS=0` (the default) `confirm()` sends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.keys import Keys


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

    async def confirm(self) -> None:
        """Return once `min_replicas` replicas have every write made so far; else raise
        `NotReplicated` (after `wait_ms`) or a `RedisError`."""
        if self.redis is None or self.min_replicas == 0:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.publish(self.channel, b"")
            pipe.execute_command("WAIT", self.min_replicas, self.wait_ms)
            _received, confirmed = await pipe.execute()
        if int(confirmed) < self.min_replicas:
            raise NotReplicated(int(confirmed), self.min_replicas, self.wait_ms)


NO_REPLICAS = Replication()
