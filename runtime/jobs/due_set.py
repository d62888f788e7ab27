"""Sorted sets of things due at a time, polled by every worker, each thing handled once.

Keyspace notifications would be simpler but are lost while no worker listens, go to every
worker, and arrive late under load. Instead a worker claims due members with a lease (their
score moves forward by the lease, so no other worker sees them meanwhile), handles them, and
only then removes them. A worker that dies in between lets its lease lapse and another one
handles the member again, so handlers must tolerate a second go.

**What it costs while nothing is due.** One script per tick claims what is due in every set
and says how long until the nearest member comes due (on Redis's clock); the poller then
sleeps that long, at most `interval`. Whoever adds a member sooner than that (the script that
opens approvals, on any worker) also appends to the wake-up stream (`Keys.due_wake`), on which
every poller's sleep is a blocking `XREAD`: it wakes at once, wherever the member was written.
An idle worker so sends a tick per `interval` (`longest_sleep`) and a read per
`BLOCKING_READ_SECONDS`, and a deadline fires within milliseconds. A member added by hand
(`ZADD` of a parked one) is seen at the next tick, within `interval`. A tick that claims
members announces the end of their lease on the wake-up stream too, so if the claimer dies
holding them every other poller looks again when the lease lapses, not a whole `interval` on.

A handler that raises (a record this deploy cannot read, a bug) leaves its member for the lease
too, and after `MAX_TRIES` tries, counted in Redis across workers, the member is parked for a
person (`Keys.parked`): one bad record must not stop the others, nor crash every worker. A
failure because the reporter's credentials are refused (`runtime.process.credentials`) is no
member's fault: it is not counted, and the poller waits until they are accepted again.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.db.connection import describe_failure, longest_block
from runtime.db.keys import Keys
from runtime.db.lua import Key, MoreKeys, Registered, ScriptCall, declare
from runtime.db.streams import stream_tail
from runtime.process.backoff import Backoff
from runtime.process.credentials import Credentials
from runtime.process.shutdown import Shutdown

log = logging.getLogger(__name__)

MAX_SLEEP_SECONDS = 300.0
"""The longest a poller sleeps between ticks (`longest_sleep`)."""
RETRY_CAP_SECONDS = 8.0
"""The longest wait between ticks while Redis does not answer: a deadline that passed meanwhile
expires within this long of Redis answering again (a late expiry is safe: the decision script
refuses a click after the deadline)."""


def longest_sleep(shard_count: int) -> float:
    """How long a poller may sleep between ticks. A member due later than this is seen by a
    tick before it is due; one due sooner must be announced on the wake-up stream (the `wait`
    script of `runtime.record.layout` does so, so both sides must use the same figure).

    The longer the sleep, the fewer ticks while idle, but the more approvals are due soon
    enough to be announced, and each announcement wakes the pollers for a tick: two minutes on
    one Redis (a tick costs 0.03 commands a second there, and an approval with a reminder at
    half of a five-minute deadline is not announced); five on a cluster, where every shard's
    poller ticks on its own and the ticks were half of an idle worker's cost.
    """
    return 120.0 if shard_count == 1 else MAX_SLEEP_SECONDS


WAKE_STREAM_LENGTH = 100
"""Wake-ups kept in the stream (approximately): a poller only needs the newest one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DueTick(ScriptCall):
    """One script per tick claims what is due in every set (`runtime/jobs/lua/due_tick.lua`)."""

    due_keys: MoreKeys
    """The due sets, then the wake-up stream if there is one."""
    lease_seconds: float
    batch: int
    sets: int
    wake_length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DueFailed(ScriptCall):
    """Another counts a member's failed tries and parks it after the last (`due_failed.lua`)."""

    due_set: Key
    tries: Key
    parked: Key
    member: str
    max_tries: int
    tries_ttl: int


_TICK = declare(DueTick, "runtime.jobs", "due_tick")
_FAILED = declare(DueFailed, "runtime.jobs", "due_failed")

MAX_TRIES = 5
"""Failed tries of one member before it is parked."""

# Counts of members removed some other way (a click removes a deadline) are left behind; they
# go with the hash, this long after the last failure.
_TRIES_TTL_SECONDS = 7 * 86400

# Woken this long after the nearest member's time, so that it is due on Redis's clock by then.
_LATE_SECONDS = 0.002

Handler = Callable[[str], Awaitable[bool]]
"""Handle one due member; True removes it, False leaves it for a retry after the lease."""


@dataclass(frozen=True, slots=True)
class Tick:
    claimed: int
    """Members claimed (and handled, or left for their lease) in this tick."""
    next_in: float | None
    """Seconds until the nearest member is due, on Redis's clock; None when the sets are empty."""
    announced: str | None = None
    """The wake-up this tick appended (it claimed members), which its own poller skips."""


@dataclass(kw_only=True)
class DuePoller:
    redis: aioredis.Redis
    due: Mapping[str, Handler]
    """Due set key -> the handler of its members; one script per tick polls them all."""
    name: str
    interval: float = MAX_SLEEP_SECONDS
    """The longest sleep between ticks (at most `MAX_SLEEP_SECONDS`)."""
    wake: str | None = None
    """The wake-up stream (`Keys.due_wake`); without one, only `interval` bounds a sleep."""
    reads: aioredis.Redis | None = None
    """The client for the blocking read of `wake`: one whose socket timeout outlasts a sleep
    (`redis` if None, the sleep then kept under its socket timeout)."""
    lease_seconds: float = 60.0
    batch: int = 100
    credentials: Credentials | None = None
    """While the reporter's credentials are refused, nothing due is claimed."""
    _stopping: Shutdown = field(default_factory=Shutdown)
    _tick: Any = field(init=False)
    _failed: Any = field(init=False)

    def __post_init__(self) -> None:
        self._tick = Registered(self.redis, _TICK)
        self._failed = Registered(self.redis, _FAILED)
        self.interval = min(self.interval, MAX_SLEEP_SECONDS)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        woken = await self._wake_tail()
        # Backs off: one line per attempt, not one a second per shard through an outage.
        backoff = Backoff(min(1.0, self.interval), RETRY_CAP_SECONDS)
        while not self._stopping.is_set():
            if self.credentials is not None and self.credentials.refused:
                await self.credentials.until_accepted(self._stopping)
                continue
            try:
                tick = await self.tick()
            except RedisError as error:
                delay = backoff.failed()
                log.warning(
                    "%s tick failed (%s); retrying in %g s",
                    self.name,
                    describe_failure(error),
                    delay,
                )
                await self._stopping.sleep(delay)
                continue
            backoff.succeeded()
            if tick.announced is not None:
                woken = tick.announced  # the tick that follows covers every wake-up until it
            if tick.claimed:
                continue  # the handlers moved or removed what they took: look again at once
            wait = self.interval if tick.next_in is None else tick.next_in + _LATE_SECONDS
            woken = await self._sleep(min(wait, self.interval), woken)

    async def sweep(self) -> int:
        """Handle the members due now; return how many were claimed."""
        return (await self.tick()).claimed

    async def tick(self) -> Tick:
        """Handle the members due now, and say when the next one is."""
        keys = list(self.due)
        wake = [self.wake] if self.wake is not None else []
        reply = await self._tick(
            DueTick(
                due_keys=[*keys, *wake],
                lease_seconds=self.lease_seconds,
                batch=self.batch,
                sets=len(keys),
                wake_length=WAKE_STREAM_LENGTH,
            )
        )
        claimed = 0
        for key, members in zip(keys, reply[1:-1], strict=True):
            for raw in members:
                claimed += 1
                await self._handle(key, raw.decode())
        next_in = float(reply[0]) if reply[0] else None
        return Tick(claimed=claimed, next_in=next_in, announced=_text(reply[-1]) or None)

    async def _wake_tail(self) -> str:
        """The newest wake-up before the first tick: any later one wakes the first sleep."""
        if self.wake is None:
            return "0-0"
        return await stream_tail(self.redis, self.wake, self._stopping, follower=self.name)

    async def _sleep(self, seconds: float, woken: str) -> str:
        """Sleep `seconds`, less if a wake-up or stop comes; the newest wake-up seen. A sleep
        longer than a blocking read may wait is several reads, not several ticks."""
        if self.wake is None:
            await self._stopping.sleep(seconds)
            return woken
        reads = self.reads or self.redis
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        while (left := until - loop.time()) > 0 and not self._stopping.is_set():
            block_ms = max(1, math.ceil(min(left, longest_block(reads)) * 1000))
            try:
                reply: Any = await self._stopping.unless_stopped(
                    reads.xread({self.wake: woken}, count=1, block=block_ms)
                )
            except RedisError:
                log.warning("%s: the wake-up stream cannot be read; retrying", self.name)
                await self._stopping.sleep(min(1.0, left))
                return woken
            for _stream, entries in reply or []:
                for entry_id, _fields in entries:
                    woken = _text(entry_id)
            if reply:
                return woken
        return woken

    async def _handle(self, key: str, member: str) -> None:
        try:
            handled = await self.due[key](member)
        except RedisError:
            raise  # Redis is out, not this member's fault: the tick is retried as a whole
        except Exception as error:  # noqa: BLE001 -- any failure of one member is counted, below
            if self.credentials is not None and self.credentials.refused_by(error):
                return  # left for its lease, uncounted: the poller waits for the credentials
            await self._count_failure(key, member, error)
            return
        if handled:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.zrem(key, member)
                pipe.hdel(Keys.due_tries(key), member)
                await pipe.execute()

    async def _count_failure(self, key: str, member: str, error: Exception) -> None:
        parked_key = Keys.parked(key)
        tries, reply = await self._failed(
            DueFailed(
                due_set=key,
                tries=Keys.due_tries(key),
                parked=parked_key,
                member=member,
                max_tries=MAX_TRIES,
                tries_ttl=_TRIES_TTL_SECONDS,
            )
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
            key,
            member,
            exc_info=error,
        )


def _summary(error: Exception) -> str:
    """The exception on one line (a ValidationError's message spans several)."""
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
