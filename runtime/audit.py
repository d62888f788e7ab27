"""The short audit trail: a capped Redis stream of what happened to runs.

It outlives each run's record, which is deleted when the run ends.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.keys import Keys

log = logging.getLogger(__name__)

AUDIT_MAX_ENTRIES = 100_000


class AuditTrail:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def record(self, event: str, run_id: str, **details: str | int | float | None) -> None:
        details = {**details, "at": time.time()}
        entry: dict[Any, Any] = {"event": event, "run_id": run_id, "details": json.dumps(details)}
        try:
            await self._redis.xadd(
                self._keys.audit, entry, maxlen=AUDIT_MAX_ENTRIES, approximate=True
            )
        except RedisError:
            # The audit trail must not fail the step it describes; the log keeps the event.
            log.warning("run %s: audit entry %s not stored: %s", run_id, event, details)

    async def events(self, run_id: str | None = None, count: int = 100) -> list[dict[str, str]]:
        scanned = count * (10 if run_id else 1)
        rows: Any = await self._redis.xrevrange(self._keys.audit, count=scanned)
        entries = [
            {key.decode(): value.decode() for key, value in fields.items()} for _id, fields in rows
        ]
        if run_id is not None:
            entries = [entry for entry in entries if entry["run_id"] == run_id]
        return list(reversed(entries[:count]))
