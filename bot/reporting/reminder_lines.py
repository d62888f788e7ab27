"""Where each call's reminders were posted in its thread, so the reminder line stops saying the
call waits once it is settled (expired, decided, stopped)."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from runtime.db import Keys

KEPT_SECONDS = 8 * 86400
"""Longer than any approval waits (`APPROVAL_TTL_SECONDS` is at most 7 days)."""


class ReminderLines:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def note(self, run_id: str, approval_id: str, ts: str) -> None:
        key = self._keys.reminder_lines(run_id)
        # One worker posts a call's reminders, one after another: no two notes race.
        found: Any = await self._redis.hget(key, approval_id)
        shown = [*(found.decode().split(",") if found else []), ts]
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, approval_id, ",".join(shown))
            pipe.expire(key, KEPT_SECONDS)
            await pipe.execute()

    async def take(self, run_id: str, approval_id: str) -> list[str]:
        """The reminder lines of a call, forgotten once read (a settled call is redrawn once)."""
        key = self._keys.reminder_lines(run_id)
        found: Any = await self._redis.hget(key, approval_id)
        if not found:
            return []  # most calls are settled before any reminder: one read, nothing to forget
        await self._redis.hdel(key, approval_id)
        return str(found.decode()).split(",")
