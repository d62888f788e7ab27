"""The audit trail: a Redis stream of everything that happened to runs and approvals.

Events: started, requested, auto_approved, auto_rejected, approved, approved_always, rejected,
answered, expired, denied (a click refused by the policy), resumed, refused (an approved call
that changed before it ran), executed, finished, failed. Decisions, resume claims, and the run's
start, its requests, each tool's execution and its finish are appended by the same Lua script
that records them (`AuditTrail.entry`), so the trail cannot miss one, and they cost no command
of their own. It outlives each run's record and is trimmed by age only (`AUDIT_RETENTION_DAYS`):
a cap on its length would let anyone who can click push real decisions out of it.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, computed_field
from redis.exceptions import RedisError

from runtime.audit.arguments import KeptArguments
from runtime.db.clock import LATEST, stamp
from runtime.db.connection import describe_failure
from runtime.db.keys import Keys
from runtime.process.shutdown import Shutdown

log = logging.getLogger(__name__)

TRIM_INTERVAL_SECONDS = 600.0
EVENT_IDS = ("call_id", "approval_id")
"""What a log line names of an audit entry that could not be stored."""


class AuditEntry(BaseModel):
    """One event, as exported (`python -m runtime audit`)."""

    model_config = ConfigDict(frozen=True)

    id: str
    event: str
    run_id: str
    at: float
    details: dict[str, Any]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def time(self) -> str:
        """`at` in ISO 8601 with its zone (UTC), as exports and logs write a time."""
        return dt.datetime.fromtimestamp(self.at, dt.UTC).isoformat(timespec="milliseconds")

    @property
    def channel(self) -> str | None:
        channel = self.details.get("channel")
        return channel if isinstance(channel, str) else None


class AuditTrail:
    def __init__(
        self, redis: aioredis.Redis, keys: Keys, *, arguments: KeptArguments | None = None
    ) -> None:
        self._redis = redis
        self._keys = keys
        self.arguments = arguments or KeptArguments()
        """What the entries of calls keep of their arguments (`AUDIT_ARGS`)."""

    @staticmethod
    def entry(event: str, run_id: str, **details: str | int | float | None) -> str:
        """An entry for a script to append with the write it records (JSON list of the stream
        entry's fields): the trail then cannot miss it, and it costs no command of its own.
        `at` is Redis's time (`stamp`), as in the entries the scripts write themselves: a
        process whose clock is off by minutes must not move an event in the trail."""
        payload = json.dumps({**details, "at": stamp()})
        return json.dumps(["event", event, "run_id", run_id, "details", payload])

    async def record(self, event: str, run_id: str, **details: str | int | float | None) -> None:
        try:
            payload = {**details, "at": await LATEST.read(self._redis)}
            entry: dict[Any, Any] = {
                "event": event,
                "run_id": run_id,
                "details": json.dumps(payload),
            }
            await self._redis.xadd(self._keys.shard_of(run_id).audit, entry)
        except RedisError as error:
            # The audit trail must not fail the step it describes. The log names the event, not
            # its details: they may hold a tool's output or a person's edited arguments.
            ids = ", ".join(f"{key} {details[key]}" for key in EVENT_IDS if details.get(key))
            log.warning(
                "run %s: audit entry %s%s not stored (%s: Redis unreachable)",
                run_id,
                event,
                f" ({ids})" if ids else "",
                type(error).__name__,
            )

    async def recent(self, count: int, *, channel: str | None = None) -> list[AuditEntry]:
        """The last `count` events, oldest first (of `channel` only, if given)."""
        found: list[AuditEntry] = []
        async for entry in self._backwards(limit=20 * count if channel else count):
            if channel is None or entry.channel == channel:
                found.append(entry)
                if len(found) == count:
                    break
        return found[::-1]

    async def for_run(self, run_id: str, *, scan: int = 20_000) -> list[AuditEntry]:
        """One run's events, oldest first, among the last `scan` entries."""
        found = [entry async for entry in self._backwards(limit=scan) if entry.run_id == run_id]
        return found[::-1]

    async def since(self, start: dt.datetime, page: int = 1000) -> AsyncIterator[AuditEntry]:
        """Every entry from `start` on, oldest first (each shard's stream, merged by time)."""
        cursor = f"{int(start.timestamp() * 1000)}-0"
        streams = [self._forwards(shard.audit, cursor, page) for shard in self._keys.shards]
        async for entry in _merged(streams, newest_first=False):
            yield entry

    async def oldest(self) -> dt.datetime | None:
        """When the oldest entry kept was written; None while the trail is empty."""
        found = []
        for shard in self._keys.shards:
            rows: Any = await self._redis.xrange(shard.audit, count=1)
            if rows:
                found.append(_written_at(rows[0][0].decode()))
        return min(found, default=None)

    async def trim(self, retention_days: int) -> None:
        # Redis's clock, the one the stream ids count on: a worker whose clock runs days ahead
        # must not trim what Redis wrote today.
        oldest = int((await LATEST.read(self._redis) - retention_days * 86400) * 1000)
        for shard in self._keys.shards:
            # Exact, not `~`: an approximate trim only drops whole stream nodes, so a quiet
            # deployment would keep events for longer than AUDIT_RETENTION_DAYS promises.
            await self._redis.xtrim(shard.audit, minid=f"{oldest}-0", approximate=False)

    async def _forwards(self, stream: str, cursor: str, page: int) -> AsyncIterator[AuditEntry]:
        while True:
            rows: Any = await self._redis.xrange(stream, min=cursor, count=page)
            for row in rows:
                yield _entry(row)
            if len(rows) < page:
                return
            cursor = "(" + rows[-1][0].decode()

    async def _backwards(self, *, limit: int, page: int = 500) -> AsyncIterator[AuditEntry]:
        """The latest `limit` entries, newest first, of all shards."""
        if self._keys.shard_count > 1:
            page = max(50, page // self._keys.shard_count)
        streams = [self._backwards_in(shard.audit, limit, page) for shard in self._keys.shards]
        taken = 0
        async for entry in _merged(streams, newest_first=True):
            yield entry
            taken += 1
            if taken == limit:
                return

    async def _backwards_in(self, stream: str, limit: int, page: int) -> AsyncIterator[AuditEntry]:
        cursor, remaining = "+", limit
        while remaining > 0:
            wanted = min(page, remaining)
            rows: Any = await self._redis.xrevrange(stream, max=cursor, count=wanted)
            for row in rows:
                yield _entry(row)
            if len(rows) < wanted:
                return
            remaining -= len(rows)
            cursor = "(" + rows[-1][0].decode()


def _order(entry: AuditEntry) -> tuple[int, float, int]:
    """Entries of two shards written in one millisecond: by the time each event says."""
    milliseconds, _, sequence = entry.id.partition("-")
    return int(milliseconds), entry.at, int(sequence or 0)


async def _merged(
    streams: list[AsyncIterator[AuditEntry]], *, newest_first: bool
) -> AsyncIterator[AuditEntry]:
    """The entries of several streams, each in order, as one stream in order of their ids (the
    time Redis wrote them); a single stream passes through."""
    if len(streams) == 1:
        async for entry in streams[0]:
            yield entry
        return
    sign = -1 if newest_first else 1
    heads: list[tuple[tuple[float, ...], int, AuditEntry]] = []

    def push(index: int, entry: AuditEntry | None) -> None:
        if entry is not None:
            heapq.heappush(heads, (tuple(sign * part for part in _order(entry)), index, entry))

    for index, stream in enumerate(streams):
        push(index, await anext(stream, None))
    while heads:
        _, index, entry = heapq.heappop(heads)
        yield entry
        push(index, await anext(streams[index], None))


def retention_note(
    oldest: dt.datetime | None, since: dt.datetime, retention_days: int
) -> str | None:
    """One line for whoever exports from `since`, when the trail cannot reach back that far."""
    kept = f"events are kept AUDIT_RETENTION_DAYS={retention_days} days"
    if oldest is None:
        return f"The audit trail is empty ({kept}), so nothing was exported."
    if since >= oldest:
        return None
    return (
        f"The audit trail starts at {oldest.isoformat(timespec='seconds')} ({kept}), "
        "so nothing older was exported."
    )


def _written_at(entry_id: str) -> dt.datetime:
    """A stream id starts with the milliseconds since the epoch when Redis appended it."""
    milliseconds = int(entry_id.split("-")[0])
    return dt.datetime.fromtimestamp(milliseconds / 1000, dt.UTC)


def _entry(row: Any) -> AuditEntry:
    entry_id, fields = row
    details = json.loads(fields[b"details"])
    return AuditEntry(
        id=entry_id.decode(),
        event=fields[b"event"].decode(),
        run_id=fields[b"run_id"].decode(),
        at=float(details.pop("at", 0.0)),
        details=details,
    )


@dataclass(kw_only=True)
class AuditTrimmer:
    """Drops audit entries older than the retention, every few minutes."""

    audit: AuditTrail
    retention_days: int
    _stopping: Shutdown = field(default_factory=Shutdown)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.audit.trim(self.retention_days)
            except RedisError as error:
                log.warning("audit trim failed (%s); retrying later", describe_failure(error))
            await self._stopping.sleep(TRIM_INTERVAL_SECONDS)
