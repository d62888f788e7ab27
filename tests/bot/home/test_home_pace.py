"""The Home tabs' shared publish rate: paced, each publish asks the bucket once (its token taken
ahead, for when it is due), on a Redis of its own so that the script's calls can be counted."""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

from bot.home.pace import PublishRate
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer


async def script_calls(redis: aioredis.Redis) -> int:
    stats: Any = await redis.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def test_a_paced_publish_asks_the_bucket_once_and_waits_its_turn(
    own_redis: RedisServer,
) -> None:
    redis = connect(own_redis.url)
    try:
        rate = PublishRate(redis=redis, keys=Keys("pace:"), per_minute=600)  # 0.1 s, 100 at once
        burst_began = time.monotonic()
        for _ in range(100):  # the burst
            await rate.wait_for_turn()
        asked, began = await script_calls(redis), time.monotonic()
        for _ in range(5):
            await rate.wait_for_turn()
        assert await script_calls(redis) - asked == 5
        # The bucket refilled one token per 0.1 s while the burst was taken (slower on a loaded
        # machine): the five wait their turns for the rest.
        refilled = began - burst_began
        assert time.monotonic() - began >= 0.5 - refilled - 0.02
    finally:
        await redis.aclose()
