"""Which decided cards have been drawn, so that a later redraw by the other process lands after
the first one instead of racing it.

After an approved edit, two processes draw the same card: the web at once (the decision), and
the worker a moment later with the preview of the edited arguments
(`SlackReporter.edit_previewed`). Slack keeps whichever update arrives last, and the web's may
take longer (it may look people up first). So the web notes each decided card it drew, and the
worker waits for that note, within `WAIT_SECONDS`, before drawing its own.
"""

from __future__ import annotations

import asyncio
import logging
import time

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.db import Keys

log = logging.getLogger(__name__)

KEPT_SECONDS = 300
"""Longer than a resume takes to start after its decision."""
WAIT_SECONDS = 3.0
"""How long the worker waits for the web's drawing; a web that died meanwhile drew nothing."""
POLL_SECONDS = 0.05


class CardDraws:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def drawn(self, run_id: str, approval_id: str) -> None:
        """Note that a decided card was drawn (best effort: the worker then waits its bound)."""
        key = self._keys.card_draws(run_id)
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hset(key, approval_id, "1")
                pipe.expire(key, KEPT_SECONDS)
                await pipe.execute()
        except RedisError:
            log.warning("run %s: card drawing not noted (Redis unreachable)", run_id)

    async def wait_drawn(self, run_id: str, approval_id: str) -> bool:
        """Whether the decided card was drawn, waiting for it up to `WAIT_SECONDS`."""
        key, deadline = self._keys.card_draws(run_id), time.monotonic() + WAIT_SECONDS
        while True:
            try:
                if await self._redis.hexists(key, approval_id):
                    return True
            except RedisError:
                log.warning("run %s: card drawing not read (Redis unreachable)", run_id)
                return False
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_SECONDS)

    async def forget(self, run_id: str, approval_id: str) -> None:
        """The note has served (the worker's drawing is next): a finished run leaves no key."""
        try:
            await self._redis.hdel(self._keys.card_draws(run_id), approval_id)
        except RedisError:
            log.warning("run %s: card drawing not forgotten (Redis unreachable)", run_id)
