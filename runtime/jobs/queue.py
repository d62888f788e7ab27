"""The job queue: one Redis stream read by a consumer group.

Enqueue is idempotent by job id (a marker key set in the same script as the XADD). A worker reads
with a blocking XREADGROUP, keeps its running jobs fresh with `XCLAIM ... JUSTID` (the heartbeat),
and steals jobs whose owner went quiet with XAUTOCLAIM. A job delivered more than
`max_deliveries` times goes to the dead-letter stream instead of running again. The loop that
does all this is `runtime.jobs.consumer.JobConsumer`.

Each shard has a stream per version of the job contract (`Shard.job_streams`): `jobs`, which
every version reads, then `jobs_v2` and `jobs_v3` for jobs an older worker cannot read
(`StartJob.version`), each read by the versions from its own on, with the same group, in the
same XREADGROUP. During a rolling deploy an older worker so never sees such a job (it would
drop it as malformed); it waits for a newer worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from runtime.db.connection import longest_block
from runtime.db.keys import JOB_GROUP, Keys
from runtime.db.lua import Registered
from runtime.db.replication import NO_REPLICAS, Replication
from runtime.jobs import scripts
from runtime.jobs.entries import entry_of, version_mark

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Delivery:
    entry_id: str
    """The stream entry's id; on a cluster `<shard>/<id>`, as every entry id given back here;
    `v2:<id>` (`<shard>/v2:<id>`) for one of `jobs_v2`, `v3:<id>` for one of `jobs_v3`."""
    payload: str
    deliveries: int


@dataclass(frozen=True, slots=True)
class Reclaimed:
    deliveries: list[Delivery]
    cursor: str
    """Where the next scan of the pending list goes on from; `START` after a full pass."""


# XAUTOCLAIM looks at a bounded stretch of the pending list per call (COUNT x 10 entries on
# Redis 7, COUNT on 6.2) and says where it stopped; scanning always from here would never reach
# a dead worker's job queued behind enough live ones.
START = "0-0"

Handler = Callable[[Delivery], Coroutine[Any, Any, None]]


class Overtaken(Exception):
    """Raised by a handler whose delivery was overtaken: a later one (of this job, or of another
    job of the same run) took its work over. The job is acknowledged only if this worker still
    holds it; else it is left to the worker that took it over, which acknowledges it when done
    (acknowledged here, it would be lost if that worker then died)."""


class JobQueue:
    """Redis-side operations on the job stream; no loops, and no state but a cluster's reads.

    On a cluster each shard has its stream (`runtime.db.keys`), and an XREADGROUP may name streams
    of one slot only: `read` keeps one blocking read per shard in flight and takes what the
    first ones bring; a read that answers after `read` returned is kept (and heartbeated) for
    the next call, never cancelled, since a cancelled read may already have been delivered.
    """

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        replication: Replication = NO_REPLICAS,
        reads: aioredis.Redis | None = None,
    ) -> None:
        """`reads`: the client for the blocking read of new jobs, whose socket timeout outlasts
        a long wait (`BLOCKING_READ_SECONDS`); `redis` if None."""
        self._redis = redis
        self._reads = reads or redis
        self._keys = keys
        self._replication = replication
        self._enqueue = Registered(redis, scripts.ENQUEUE)
        self._heartbeat = Registered(redis, scripts.HEARTBEAT)
        self._forget_idle = Registered(redis, scripts.FORGET_IDLE_CONSUMERS)
        self._in_flight: dict[int, asyncio.Task[list[Delivery]]] = {}
        self._ready: list[Delivery] = []
        self._known: set[str] = set()
        """Streams this process has seen exist: one missing later was lost, not new."""

    async def enqueue(
        self, job_id: str, payload: str, *, run_id: str | None = None, version: int = 1
    ) -> bool:
        """Add a job unless one with this id was enqueued recently. True if added. It goes to
        `run_id`'s shard, to the stream of the contract `version` that can read it.

        Returns once the replicas have it (`REDIS_MIN_REPLICAS`), a duplicate's first copy
        too; raises `NotReplicated` if they do not confirm in time."""
        shard = self._keys.shard_of(run_id or job_id)
        stream = shard.job_streams[version - 1]
        other, third = (s for s in shard.job_streams if s != stream)
        marker = shard.job_marker(job_id)
        added, made = await self._enqueue(
            scripts.Enqueue(stream=stream, marker=marker, other=other, third=third, job=payload)
        )
        self._made(stream, bool(made))
        self._known.update((other, third))
        await self._replication.confirm()
        return added is not None

    async def remade_if_lost(self, error: RedisError) -> bool:
        """After `error` from a read: if it says the job stream or its group is gone (an
        emptied Redis), make them again, say so in the log, and return True."""
        if not (isinstance(error, ResponseError) and str(error).startswith("NOGROUP")):
            return False
        try:
            made = [stream for _, stream in self._streams() if await self._make_group(stream)]
            if any(stream in self._known for stream in made):
                # One line however many: a shard's two streams are lost together.
                log.error(scripts.STREAM_LOST, ", ".join(made))
            self._known.update(made)
        except RedisError:
            return False  # away again: the caller's retry tries once more
        return True

    async def pin(self, consumer: str, entry_id: str) -> bool:
        """Before each attempt of a job: remember the primary it writes to, so that its `ack`
        (and every confirmation in between) fails with `PrimaryChanged` after a failover.
        False if the primary changed since the last attempt and the job is not ours there (it
        was never delivered to us on the new one, or another worker took it)."""
        primary = await self._replication.primary()
        last = self._replication.pinned()
        if last is not None and primary != last and not await self.keep(consumer, entry_id):
            return False
        self._replication.pin(primary)
        return True

    async def ensure_group(self) -> None:
        for _, stream in self._streams():
            await self._make_group(stream)
            self._known.add(stream)

    def _streams(self) -> list[tuple[int, str]]:
        """Every job stream, with its shard: each shard's `jobs`, then `jobs_v2`, `jobs_v3`."""
        return [
            (shard.index, stream) for shard in self._keys.shards for stream in shard.job_streams
        ]

    def _made(self, stream: str, made: bool) -> None:
        """A stream made anew is news only if this process saw it before (a first deploy's
        first `/agent` makes it too)."""
        if made and stream in self._known:
            log.error(scripts.STREAM_LOST, stream)
        self._known.add(stream)

    async def _make_group(self, stream: str) -> bool:
        """Make the stream's group unless it exists; whether it had to be made."""
        try:
            # From id 0 so that jobs enqueued before the first worker ever started still run.
            await self._redis.xgroup_create(stream, JOB_GROUP, id="0", mkstream=True)
        except ResponseError as error:
            if not str(error).startswith("BUSYGROUP"):
                raise
            return False
        return True

    @property
    def longest_block_ms(self) -> int:
        """The longest wait `read` may ask for on its client."""
        return int(longest_block(self._reads) * 1000)

    async def read(self, consumer: str, count: int, block_ms: int) -> list[Delivery]:
        if self._keys.shard_count == 1:
            # Each stream of the read gives up to `count`: the rest waits in `_ready`.
            if not self._ready:
                self._ready = await self._read_shard(0, consumer, count, block_ms)
            taken, self._ready = self._ready[:count], self._ready[count:]
            return taken
        loop = asyncio.get_running_loop()
        deadline = loop.time() + block_ms / 1000
        # A shard's read that ends empty is sent again at once: every stream stays watched,
        # and the caller hears back only with jobs or after `block_ms`, as with one stream.
        # With a client of its own for blocking reads, sized for one per shard, each read waits
        # as long as that client allows, not `block_ms` (the caller's pace for its takeover
        # sweeps): reads outlive calls anyway, and an idle worker so renews its shards' reads
        # every `BLOCKING_READ_SECONDS`, not every 10 s. On the shared client they would hold
        # its connections.
        shard_block = self.longest_block_ms if self._reads is not self._redis else block_ms
        while not self._ready:
            for index in range(self._keys.shard_count):
                if index not in self._in_flight:
                    read = self._read_shard(index, consumer, count, shard_block)
                    self._in_flight[index] = loop.create_task(read, name=f"jobs:read:s{index}")
            left = max(0.0, deadline - loop.time())
            await asyncio.wait(
                set(self._in_flight.values()), timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            self._collect()
            if loop.time() >= deadline:
                break
        taken, self._ready = self._ready[:count], self._ready[count:]
        return taken

    def _collect(self) -> None:
        """Move the answers of finished reads to `_ready`; raise the first failure after."""
        failure: BaseException | None = None
        for index, read in list(self._in_flight.items()):
            if not read.done():
                continue
            del self._in_flight[index]
            if read.cancelled():
                continue
            if (error := read.exception()) is not None:
                failure = failure or error
                continue
            self._ready.extend(read.result())
        if failure is not None:
            raise failure

    async def _read_shard(
        self, index: int, consumer: str, count: int, block_ms: int
    ) -> list[Delivery]:
        streams = self._keys.shard(index).job_streams
        reply: Any = await self._reads.xreadgroup(
            JOB_GROUP, consumer, dict.fromkeys(streams, ">"), count=count, block=block_ms
        )
        return [
            self._delivery(index, _text(stream), entry, 1)
            for stream, entries in reply or []
            for entry in entries
        ]

    async def reclaim(
        self, consumer: str, min_idle_ms: int, count: int, cursor: str = START
    ) -> Reclaimed:
        """Take over jobs whose owner stopped heartbeating, scanning on from `cursor`
        (`<n>|<id>`: the pending lists of every stream, `_streams`, one after another)."""
        index, _, at = cursor.rpartition("|")
        streams = self._streams()
        n = int(index or 0)
        n = n if n < len(streams) else 0
        while True:
            shard, stream = streams[n]
            found, at = await self._reclaim_stream(shard, stream, consumer, min_idle_ms, count, at)
            if at != START:
                return Reclaimed(found, f"{n}|{at}")
            if found or n + 1 >= len(streams):
                return Reclaimed(found, f"{n + 1}|{START}" if n + 1 < len(streams) else START)
            n += 1

    async def _reclaim_stream(
        self, index: int, stream: str, consumer: str, min_idle_ms: int, count: int, cursor: str
    ) -> tuple[list[Delivery], str]:
        reply = await self._redis.xautoclaim(
            stream, JOB_GROUP, consumer, min_idle_ms, start_id=cursor, count=count
        )
        next_cursor = _text(reply[0])
        entries = [entry for entry in reply[1] if entry[1]]  # deleted entries come back empty
        if not entries:
            return [], next_cursor
        counts = await self._delivery_counts(stream, [_text(entry_id) for entry_id, _ in entries])
        deliveries = [
            self._delivery(index, stream, entry, counts.get(_text(entry[0]), 1))
            for entry in entries
        ]
        return deliveries, next_cursor

    async def _delivery_counts(self, stream: str, entry_ids: list[str]) -> dict[str, int]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for entry_id in entry_ids:
                pipe.xpending_range(stream, JOB_GROUP, entry_id, entry_id, 1)
            replies = await pipe.execute()
        return {
            _text(row["message_id"]): int(row["times_delivered"])
            for rows in replies
            for row in rows
        }

    async def ack(self, entry_id: str) -> None:
        """Done with a job: only once the replicas have what it wrote (else `NotReplicated`,
        and the job stays pending), so that a failover cannot keep the ack and lose the work."""
        await self._replication.confirm()
        stream, entry = self._where(entry_id)
        # One round trip, no MULTI/EXEC (two commands more): XACK alone settles the job; if
        # Redis stopped between the two, an acknowledged entry would merely stay in the stream.
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.xack(stream, JOB_GROUP, entry)
            pipe.xdel(stream, entry)
            await pipe.execute()

    async def heartbeat(self, consumer: str, entry_ids: list[str]) -> int:
        """Reset the idle time of jobs this consumer still owns; return how many it owns.
        Jobs read but not handed out yet (on a cluster) are kept fresh too."""
        by_stream: dict[str, list[str]] = {}
        for token in [*entry_ids, *(d.entry_id for d in self._read_but_not_taken())]:
            stream, entry = self._where(token)
            by_stream.setdefault(stream, []).append(entry)
        kept = 0
        for stream, entries in by_stream.items():
            beat = scripts.Heartbeat(stream=stream, consumer=consumer, entries=entries)
            kept += int(await self._heartbeat(beat))
        return kept

    async def keep(self, consumer: str, entry_id: str) -> bool:
        """Heartbeat one job; False if this consumer holds it no more (it was taken over)."""
        stream, entry = self._where(entry_id)
        kept = await self._heartbeat(
            scripts.Heartbeat(stream=stream, consumer=consumer, entries=[entry])
        )
        return int(kept) == 1

    def _read_but_not_taken(self) -> list[Delivery]:
        done = [r for r in self._in_flight.values() if r.done() and not r.cancelled()]
        return [*self._ready, *(d for r in done if r.exception() is None for d in r.result())]

    async def hand_back(self, consumer: str, idle_ms: int) -> int:
        """Make every job this consumer holds claimable by others right away."""
        for read in self._in_flight.values():
            read.cancel()  # delivered or not, its job is in our pending list: handed back below
        await asyncio.gather(*self._in_flight.values(), return_exceptions=True)
        self._in_flight.clear()
        self._ready.clear()
        handed = 0
        for _, stream in self._streams():
            rows: Any = await self._redis.xpending_range(
                stream, JOB_GROUP, "-", "+", 1000, consumername=consumer
            )
            entry_ids: list[Any] = [_text(row["message_id"]) for row in rows]
            if entry_ids:
                await self._redis.xclaim(
                    stream, JOB_GROUP, consumer, 0, entry_ids, idle=idle_ms, justid=True
                )
            handed += len(entry_ids)
        return handed

    async def bury(self, delivery: Delivery, reason: str) -> None:
        """Move a job to the dead-letter stream (its shard's, on a cluster)."""
        stream, entry = self._where(delivery.entry_id)
        shard = self._keys.shard(self._shard_of_token(delivery.entry_id))
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xadd(
                shard.dead_jobs,
                {"job": delivery.payload, "reason": reason, "deliveries": delivery.deliveries},
                maxlen=10_000,
                approximate=True,
            )
            pipe.xack(stream, JOB_GROUP, entry)
            pipe.xdel(stream, entry)
            await pipe.execute()

    async def forget_consumer(self, consumer: str) -> None:
        for _, stream in self._streams():
            await self._redis.xgroup_delconsumer(stream, JOB_GROUP, consumer)

    async def forget_idle_consumers(self, min_idle_ms: int) -> list[str]:
        """Drop consumers that hold no jobs and have not read for `min_idle_ms`."""
        gone: set[str] = set()
        for _, stream in self._streams():
            names: list[bytes | str] = await self._forget_idle(
                scripts.ForgetIdleConsumers(stream=stream, min_idle_ms=min_idle_ms)
            )
            gone.update(_text(name) for name in names)
        return sorted(gone)

    def _delivery(self, shard: int, stream: str, entry: Any, deliveries: int) -> Delivery:
        entry_id, fields = entry
        payload = fields.get(b"job", fields.get("job", b""))
        token = _text(entry_id)
        version = self._keys.shard(shard).job_streams.index(stream) + 1
        if version > 1:
            token = f"{version_mark(version)}{token}"
        if self._keys.shard_count > 1:
            token = f"{shard}/{token}"
        return Delivery(token, _text(payload), deliveries)

    def _shard_of_token(self, token: str) -> int:
        shard, _, _ = token.rpartition("/")
        return int(shard or 0)

    def _where(self, token: str) -> tuple[str, str]:
        return entry_of(self._keys, token)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
