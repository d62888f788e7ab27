"""The job queue: one Redis stream read by a consumer group.

Enqueue is idempotent by job id (a marker key set in the same script as the XADD). A worker reads
with a blocking XREADGROUP, keeps its running jobs fresh with `XCLAIM ... JUSTID` (the heartbeat),
and steals jobs whose owner went quiet with XAUTOCLAIM. A job delivered more than
`max_deliveries` times goes to the dead-letter stream instead of running again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from runtime.keys import JOB_GROUP, Keys
from runtime.shutdown_budget import ShutdownBudget
from runtime.task_set import TaskSet

log = logging.getLogger(__name__)

# How long an enqueued job id is remembered, to drop a duplicate of the same request.
MARKER_TTL_SECONDS = 3600

# Of the shutdown budget, running jobs get all but the end: this share of it, at most this long,
# is kept for cancelling the rest (first half) and handing them back (second half).
AFTER_JOBS_SHARE = 0.2
AFTER_JOBS_MAX_SECONDS = 5.0
HAND_BACK_MIN_SECONDS = 1.0
"""Two Redis calls; given this long even when the budget is spent, or jobs wait an idle timeout."""

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


@dataclass(frozen=True, slots=True)
class Delivery:
    entry_id: str
    payload: str
    deliveries: int


Handler = Callable[[Delivery], Coroutine[Any, Any, None]]


class JobQueue:
    """Redis-side operations on the job stream; no loops, no state."""

    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._enqueue = redis.register_script(_ENQUEUE_SCRIPT)
        self._heartbeat = redis.register_script(_HEARTBEAT_SCRIPT)

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

    async def reclaim(self, consumer: str, min_idle_ms: int, count: int) -> list[Delivery]:
        """Take over jobs whose owner stopped heartbeating."""
        reply = await self._redis.xautoclaim(
            self._keys.jobs, JOB_GROUP, consumer, min_idle_ms, start_id="0-0", count=count
        )
        entries = [entry for entry in reply[1] if entry[1]]  # deleted entries come back empty
        if not entries:
            return []
        counts = await self._delivery_counts([_text(entry_id) for entry_id, _ in entries])
        return [_delivery(entry, counts.get(_text(entry[0]), 1)) for entry in entries]

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


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _delivery(entry: Any, deliveries: int) -> Delivery:
    entry_id, fields = entry
    payload = fields.get(b"job", fields.get("job", b""))
    return Delivery(_text(entry_id), _text(payload), deliveries)


@dataclass(kw_only=True)
class JobConsumer:
    """Runs jobs from the queue, up to `concurrency` at once, until stopped."""

    queue: JobQueue
    consumer: str
    handler: Handler
    on_dead: Handler
    concurrency: int
    idle_timeout: float
    max_deliveries: int
    shutdown: ShutdownBudget = field(default_factory=lambda: ShutdownBudget(seconds=25.0))
    """The worker's whole shutdown, from stop() (Heroku sends SIGKILL 30 s after SIGTERM)."""
    block_ms: int = 2000
    _running: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _slots: asyncio.Semaphore = field(init=False)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: TaskSet = field(default_factory=lambda: TaskSet("jobs"))
    _next_reclaim: float = 0.0

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.concurrency)

    async def run(self) -> None:
        """Run jobs until stop(); then let running ones finish within the grace period."""
        await self.queue.ensure_group()
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        try:
            await self._read_loop()
            await self._drain()
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    def stop(self) -> None:
        """Take no new jobs; run() returns once running ones are done or handed back."""
        self.shutdown.start()
        self._stopping.set()

    async def _drain(self) -> None:
        after_jobs = min(AFTER_JOBS_MAX_SECONDS, self.shutdown.seconds * AFTER_JOBS_SHARE)
        await self._tasks.wait(grace=self.shutdown.left(keep=after_jobs))
        unfinished = self._tasks.cancel_all()
        await self._tasks.wait(grace=self.shutdown.left(keep=after_jobs / 2))
        try:
            async with asyncio.timeout(max(self.shutdown.left(), HAND_BACK_MIN_SECONDS)):
                idle_ms = int(self.idle_timeout * 1000) + 1
                handed = await self.queue.hand_back(self.consumer, idle_ms)
                if handed == 0:
                    await self.queue.forget_consumer(self.consumer)
        except (RedisError, TimeoutError):
            log.exception("could not hand back jobs; they return after the idle timeout")
            return
        log.info("stopped: %d job(s) cancelled, %d handed back", unfinished, handed)

    async def _read_loop(self) -> None:
        """One free slot at a time: fill it with a dead worker's job, else with a new one."""
        while not self._stopping.is_set():
            await self._slots.acquire()
            if self._stopping.is_set():
                self._slots.release()
                return
            try:
                delivery = await self._take_over_one() or await self._read_one()
            except RedisError:
                self._slots.release()
                log.warning("job queue unreachable; retrying in 1 s", exc_info=True)
                await self._sleep(1.0)
                continue
            if delivery is None:
                self._slots.release()
            else:
                self._start(delivery)

    async def _read_one(self) -> Delivery | None:
        block_ms = max(50, min(self.block_ms, int(self.idle_timeout * 1000 / 3)))
        deliveries = await self._until_stopped(self.queue.read(self.consumer, 1, block_ms))
        return deliveries[0] if deliveries else None

    async def _take_over_one(self) -> Delivery | None:
        """A job whose owner went quiet, if one is due; burying those that failed too often."""
        if asyncio.get_running_loop().time() < self._next_reclaim:
            return None
        idle_ms = int(self.idle_timeout * 1000)
        while stolen := await self.queue.reclaim(self.consumer, idle_ms, 1):
            [delivery] = stolen
            if delivery.deliveries <= self.max_deliveries:
                log.warning(
                    "job %s taken over (delivery %d)", delivery.entry_id, delivery.deliveries
                )
                return delivery
            await self.queue.bury(delivery, f"failed {delivery.deliveries - 1} times")
            log.error("job %s moved to the dead-letter stream", delivery.entry_id)
            self._tasks.spawn(self.on_dead(delivery), name=f"dead:{delivery.entry_id}")
        self._next_reclaim = asyncio.get_running_loop().time() + self.idle_timeout / 3
        return None

    async def _heartbeat_loop(self) -> None:
        """Keep our running jobs from looking abandoned, also while draining."""
        while True:
            await asyncio.sleep(self.idle_timeout / 3)
            try:
                await self.queue.heartbeat(self.consumer, list(self._running))
            except RedisError:
                log.warning("job heartbeat failed; retrying", exc_info=True)

    def _start(self, delivery: Delivery) -> None:
        task = self._tasks.spawn(self._run_one(delivery), name=f"job:{delivery.entry_id}")
        self._running[delivery.entry_id] = task

    async def _run_one(self, delivery: Delivery) -> None:
        try:
            await self.handler(delivery)
            await self.queue.ack(delivery.entry_id)
        except Exception:
            # Not acknowledged: once idle it is reclaimed, and buried after too many tries.
            log.exception("job %s failed; it will be retried", delivery.entry_id)
        finally:
            self._running.pop(delivery.entry_id, None)
            self._slots.release()

    async def _until_stopped(self, work: Awaitable[list[Delivery]]) -> list[Delivery]:
        read = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({read, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if read.done():
            return read.result()
        read.cancel()
        # A read cancelled in flight may have been delivered to us; drain() hands it back.
        with contextlib.suppress(asyncio.CancelledError):
            await read
        return []

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)
