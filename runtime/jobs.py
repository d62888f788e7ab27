"""The job queue: one Redis stream read by a consumer group.

Enqueue is idempotent by job id (a marker key set in the same script as the XADD). A worker reads
with a blocking XREADGROUP, keeps its running jobs fresh with `XCLAIM ... JUSTID` (the heartbeat),
and steals jobs whose owner went quiet with XAUTOCLAIM. A job delivered more than
`max_deliveries` times goes to the dead-letter stream instead of running again. The loop that
does all this is `runtime.job_consumer.JobConsumer`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from runtime.keys import JOB_GROUP, Keys

# How long an enqueued job id is remembered, to drop a duplicate of the same request.
MARKER_TTL_SECONDS = 3600

# Shared with other scripts that enqueue as part of a larger atomic step.
ENQUEUE_LUA = """
local function enqueue(stream, marker, job, marker_ttl)
  if redis.call('SET', marker, '1', 'NX', 'EX', marker_ttl) then
    return redis.call('XADD', stream, '*', 'job', job)
  end
  return false
end
"""

_ENQUEUE_SCRIPT = ENQUEUE_LUA + "return enqueue(KEYS[1], KEYS[2], ARGV[1], ARGV[2])"

# Reset the idle time only of entries this consumer still owns: a plain XCLAIM would take back
# a job that another worker already took over.
_HEARTBEAT_SCRIPT = """
local kept = 0
for i = 3, #ARGV do
  local row = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if row[1] and row[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    kept = kept + 1
  end
end
return kept
"""


# Drop consumers with no pending jobs that have not read for longer than ARGV[2] ms; atomic, so
# a consumer cannot pick up a job between the check and the delete (which would drop the job
# from the pending list). Returns their names.
_FORGET_IDLE_CONSUMERS_SCRIPT = """
local gone = {}
for _, row in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local consumer = {}
  for i = 1, #row, 2 do consumer[row[i]] = row[i + 1] end
  if consumer['pending'] == 0 and consumer['idle'] > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], consumer['name'])
    table.insert(gone, consumer['name'])
  end
end
return gone
"""


@dataclass(frozen=True, slots=True)
class Delivery:
    entry_id: str
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


class JobQueue:
    """Redis-side operations on the job stream; no loops, no state."""

    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._enqueue = redis.register_script(_ENQUEUE_SCRIPT)
        self._heartbeat = redis.register_script(_HEARTBEAT_SCRIPT)
        self._forget_idle = redis.register_script(_FORGET_IDLE_CONSUMERS_SCRIPT)

    async def enqueue(self, job_id: str, payload: str) -> bool:
        """Add a job unless one with this id was enqueued recently. True if added."""
        added = await self._enqueue(
            keys=[self._keys.jobs, self._keys.job_marker(job_id)],
            args=[payload, MARKER_TTL_SECONDS],
        )
        return added is not None

    async def ensure_group(self) -> None:
        with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists already
            # From id 0 so that jobs enqueued before the first worker ever started still run.
            await self._redis.xgroup_create(self._keys.jobs, JOB_GROUP, id="0", mkstream=True)

    async def read(self, consumer: str, count: int, block_ms: int) -> list[Delivery]:
        reply: Any = await self._redis.xreadgroup(
            JOB_GROUP, consumer, {self._keys.jobs: ">"}, count=count, block=block_ms
        )
        return [_delivery(entry, 1) for _stream, entries in reply or [] for entry in entries]

    async def reclaim(
        self, consumer: str, min_idle_ms: int, count: int, cursor: str = START
    ) -> Reclaimed:
        """Take over jobs whose owner stopped heartbeating, scanning on from `cursor`."""
        reply = await self._redis.xautoclaim(
            self._keys.jobs, JOB_GROUP, consumer, min_idle_ms, start_id=cursor, count=count
        )
        next_cursor = _text(reply[0])
        entries = [entry for entry in reply[1] if entry[1]]  # deleted entries come back empty
        if not entries:
            return Reclaimed([], next_cursor)
        counts = await self._delivery_counts([_text(entry_id) for entry_id, _ in entries])
        deliveries = [_delivery(entry, counts.get(_text(entry[0]), 1)) for entry in entries]
        return Reclaimed(deliveries, next_cursor)

    async def _delivery_counts(self, entry_ids: list[str]) -> dict[str, int]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for entry_id in entry_ids:
                pipe.xpending_range(self._keys.jobs, JOB_GROUP, entry_id, entry_id, 1)
            replies = await pipe.execute()
        return {
            _text(row["message_id"]): int(row["times_delivered"])
            for rows in replies
            for row in rows
        }

    async def ack(self, entry_id: str) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xack(self._keys.jobs, JOB_GROUP, entry_id)
            pipe.xdel(self._keys.jobs, entry_id)
            await pipe.execute()

    async def heartbeat(self, consumer: str, entry_ids: list[str]) -> int:
        """Reset the idle time of jobs this consumer still owns; return how many it owns."""
        if not entry_ids:
            return 0
        kept = await self._heartbeat(keys=[self._keys.jobs], args=[JOB_GROUP, consumer, *entry_ids])
        return int(kept)

    async def hand_back(self, consumer: str, idle_ms: int) -> int:
        """Make every job this consumer holds claimable by others right away."""
        rows: Any = await self._redis.xpending_range(
            self._keys.jobs, JOB_GROUP, "-", "+", 1000, consumername=consumer
        )
        entry_ids: list[Any] = [_text(row["message_id"]) for row in rows]
        if entry_ids:
            await self._redis.xclaim(
                self._keys.jobs, JOB_GROUP, consumer, 0, entry_ids, idle=idle_ms, justid=True
            )
        return len(entry_ids)

    async def bury(self, delivery: Delivery, reason: str) -> None:
        """Move a job to the dead-letter stream."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xadd(
                self._keys.dead_jobs,
                {"job": delivery.payload, "reason": reason, "deliveries": delivery.deliveries},
                maxlen=10_000,
                approximate=True,
            )
            pipe.xack(self._keys.jobs, JOB_GROUP, delivery.entry_id)
            pipe.xdel(self._keys.jobs, delivery.entry_id)
            await pipe.execute()

    async def forget_consumer(self, consumer: str) -> None:
        await self._redis.xgroup_delconsumer(self._keys.jobs, JOB_GROUP, consumer)

    async def forget_idle_consumers(self, min_idle_ms: int) -> list[str]:
        """Drop consumers that hold no jobs and have not read for `min_idle_ms`."""
        gone: list[bytes | str] = await self._forget_idle(
            keys=[self._keys.jobs], args=[JOB_GROUP, min_idle_ms]
        )
        return [_text(name) for name in gone]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _delivery(entry: Any, deliveries: int) -> Delivery:
    entry_id, fields = entry
    payload = fields.get(b"job", fields.get("job", b""))
    return Delivery(_text(entry_id), _text(payload), deliveries)
