"""The audit trail: a Redis stream of everything that happened to runs and approvals.

Events: started, requested, auto_approved, auto_rejected, approved, approved_always, rejected,
expired, denied (a click refused by the policy), resumed, refused (an approved call that changed
before it ran), executed, finished, failed. Decisions and resume claims are appended by the same
Lua script that records them, so the trail cannot miss one. It outlives each run's record and
is trimmed by age only (`AUDIT_RETENTION_DAYS`): a cap on its length would let anyone who can
click push real decisions out of it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict
from redis.exceptions import RedisError

from runtime.keys import Keys
from runtime.stopping import Stopping

log = logging.getLogger(__name__)

TRIM_INTERVAL_SECONDS = 600.0


class AuditEntry(BaseModel):
    """One event, as exported (`python -m runtime audit`)."""

    model_config = ConfigDict(frozen=True)

    id: str
    event: str
    run_id: str
    at: float
    details: dict[str, Any]

    @property
    def channel(self) -> str | None:
        channel = self.details.get("channel")
        return channel if isinstance(channel, str) else None


class AuditTrail:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def record(self, event: str, run_id: str, **details: str | int | float | None) -> None:
        payload = {**details, "at": time.time()}
        entry: dict[Any, Any] = {"event": event, "run_id": run_id, "details": json.dumps(payload)}
        try:
            await self._redis.xadd(self._keys.audit, entry)
        except RedisError:
            # The audit trail must not fail the step it describes; the log keeps the event.
            log.warning("run %s: audit entry %s not stored: %s", run_id, event, details)

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
        cursor = f"{int(start.timestamp() * 1000)}-0"
        while True:
            rows: Any = await self._redis.xrange(self._keys.audit, min=cursor, count=page)
            for row in rows:
                yield _entry(row)
            if len(rows) < page:
                return
            cursor = "(" + rows[-1][0].decode()

    async def oldest(self) -> dt.datetime | None:
        """When the oldest entry kept was written; None while the trail is empty."""
        rows: Any = await self._redis.xrange(self._keys.audit, count=1)
        return _written_at(rows[0][0].decode()) if rows else None

    async def trim(self, retention_days: int) -> None:
        oldest = int((time.time() - retention_days * 86400) * 1000)
        # Exact, not `~`: an approximate trim only drops whole stream nodes, so a quiet
        # deployment would keep events for longer than AUDIT_RETENTION_DAYS promises.
        await self._redis.xtrim(self._keys.audit, minid=f"{oldest}-0", approximate=False)

    async def _backwards(self, *, limit: int, page: int = 500) -> AsyncIterator[AuditEntry]:
        cursor, remaining = "+", limit
        while remaining > 0:
            wanted = min(page, remaining)
            rows: Any = await self._redis.xrevrange(self._keys.audit, max=cursor, count=wanted)
            for row in rows:
                yield _entry(row)
            if len(rows) < wanted:
                return
            remaining -= len(rows)
            cursor = "(" + rows[-1][0].decode()


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
        f"The audit trail starts at {oldest:%Y-%m-%d %H:%M} UTC ({kept}), "
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
    _stopping: Stopping = field(default_factory=Stopping)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.audit.trim(self.retention_days)
            except RedisError:
                log.warning("audit trim failed; retrying later", exc_info=True)
            await self._stopping.sleep(TRIM_INTERVAL_SECONDS)
