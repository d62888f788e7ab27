"""A sorted set of things due at a time, polled by every worker, each thing handled once.

Keyspace notifications would be simpler but are lost while no worker listens, go to every
worker, and arrive late under load. Instead a worker claims due members with a lease (their
score moves forward by the lease, so no other worker sees them meanwhile), handles them, and
only then removes them. A worker that dies in between lets its lease lapse and another one
handles the member again, so handlers must tolerate a second go.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.stopping import Stopping

log = logging.getLogger(__name__)

# Cost per tick is O(log N + due): it grows with what is due, not with what is pending.
_CLAIM_DUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), member)
end
return due
"""

Handler = Callable[[str], Awaitable[bool]]
"""Handle one due member; True removes it, False leaves it for a retry after the lease."""


@dataclass(kw_only=True)
class DuePoller:
    redis: aioredis.Redis
    key: str
    handler: Handler
    name: str
    interval: float = 1.0
    lease_seconds: float = 60.0
    batch: int = 100
    _stopping: Stopping = field(default_factory=Stopping)

    def __post_init__(self) -> None:
        self._claim = self.redis.register_script(_CLAIM_DUE)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                while await self.sweep() == self.batch and not self._stopping.is_set():
                    pass  # a full batch: more may be due right now
            except RedisError:
                log.warning("%s sweep failed; retrying", self.name, exc_info=True)
            await self._stopping.sleep(self.interval)

    async def sweep(self) -> int:
        """Handle the members due now; return how many were claimed."""
        members = await self._claim(keys=[self.key], args=[self.lease_seconds, self.batch])
        for raw in members:
            member = raw.decode()
            if await self.handler(member):
                await self.redis.zrem(self.key, member)
        return len(members)
