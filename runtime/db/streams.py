"""Where a follower of a Redis stream starts: after the newest entry there is now."""

from __future__ import annotations

import logging
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.db.connection import FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS
from runtime.process.backoff import Backoff
from runtime.process.shutdown import Shutdown

log = logging.getLogger(__name__)


async def stream_tail(
    redis: aioredis.Redis, stream: str, stopping: Shutdown, *, follower: str
) -> str:
    """The id of `stream`'s newest entry ("0-0" if it has none): a follower that reads on from
    it misses nothing appended later. Asked again while Redis does not answer, until
    `stopping` ("0-0" then), backing off up to `MAX_RETRY_SECONDS` as
    `wait_until_reachable` does: one line per attempt, not one a second through an outage."""
    backoff = Backoff(FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS)
    while not stopping.is_set():
        try:
            newest: Any = await redis.xrevrange(stream, count=1)
        except RedisError:
            delay = backoff.failed()
            log.warning("%s: %s cannot be read; retrying in %g s", follower, stream, delay)
            await stopping.sleep(delay)
            continue
        if not newest:
            return "0-0"
        entry_id = newest[0][0]
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    return "0-0"
