"""A sorted set of things due at a time, polled by every worker, each thing handled once.

Keyspace notifications would be simpler but are lost while no worker listens, go to every
worker, and arrive late under load. Instead a worker claims due members with a lease (their
score moves forward by the lease, so no other worker sees them meanwhile), handles them, and
only then removes them. A worker that dies in between lets its lease lapse and another one
handles the member again, so handlers must tolerate a second go.

A handler that raises (a record this deploy cannot read, a bug) leaves its member for the lease
too, and after `MAX_TRIES` tries, counted in Redis across workers, the member is parked for a
person (`Keys.parked`): one bad record must not stop the others, nor crash every worker.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.keys import Keys
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

# Count one more failed try of a member; on the last, move it from the due set to the parked one.
# Returns the tries so far and what became of it: retry, parked, or gone (removed meanwhile,
# say by a click).
_FAILED = """
local tries = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('EXPIRE', KEYS[2], ARGV[3])
if tries < tonumber(ARGV[2]) then
  return {tries, 'retry'}
end
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return {tries, 'gone'}
end
redis.call('ZADD', KEYS[3], redis.call('TIME')[1], ARGV[1])
return {tries, 'parked'}
"""

MAX_TRIES = 5
"""Failed tries of one member before it is parked."""

# Counts of members removed some other way (a click removes a deadline) are left behind; they
# go with the hash, this long after the last failure.
_TRIES_TTL_SECONDS = 7 * 86400

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
        self._failed = self.redis.register_script(_FAILED)

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
            await self._handle(raw.decode())
        return len(members)

    async def _handle(self, member: str) -> None:
        try:
            handled = await self.handler(member)
        except RedisError:
            raise  # Redis is out, not this member's fault: the sweep is retried as a whole
        except Exception as error:  # noqa: BLE001 -- any failure of one member is counted, below
            await self._count_failure(member, error)
            return
        if handled:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.zrem(self.key, member)
                pipe.hdel(Keys.due_tries(self.key), member)
                await pipe.execute()

    async def _count_failure(self, member: str, error: Exception) -> None:
        parked_key = Keys.parked(self.key)
        tries, reply = await self._failed(
            keys=[self.key, Keys.due_tries(self.key), parked_key],
            args=[member, MAX_TRIES, _TRIES_TTL_SECONDS],
        )
        outcome = reply.decode() if isinstance(reply, bytes) else reply
        if outcome == "gone":
            return
        if outcome == "retry":
            log.warning(
                "%s: %s failed (try %d of %d: %s); retrying in %g s",
                self.name,
                member,
                tries,
                MAX_TRIES,
                _summary(error),
                self.lease_seconds,
            )
            return
        log.error(
            "%s: %s parked after %d failed tries (%s); list parked ones with "
            "`ZRANGE %s 0 -1 WITHSCORES`, and once fixed `ZADD %s 0 %s` retries it",
            self.name,
            member,
            tries,
            _summary(error),
            parked_key,
            self.key,
            member,
            exc_info=error,
        )


def _summary(error: Exception) -> str:
    """The exception on one line (a ValidationError's message spans several)."""
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
