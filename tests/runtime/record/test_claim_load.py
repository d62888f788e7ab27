"""A resume's claim reads the run's hash in the same step as it takes the run: the delivery
loads the run from the claim's reply, as the hash then stands, and reads nothing again."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.jobs.contracts import Conversation, new_run_id
from runtime.record import layout as rr
from runtime.record.envelope import RunEnvelope
from runtime.record.store import RunStore


@pytest.fixture
def redis(own_client: aioredis.Redis) -> aioredis.Redis:
    """A Redis of the test's own: the commands it counts are the test's alone."""
    return own_client


async def hgetalls(redis: aioredis.Redis) -> int:
    stats: Any = await redis.info("commandstats")
    return int(stats.get("cmdstat_hgetall", {}).get("calls", 0))


async def test_a_resume_loads_the_run_from_its_claim_as_the_claim_left_it(
    redis: aioredis.Redis,
) -> None:
    keys = Keys("t:")
    store = RunStore(redis, keys)
    envelope = RunEnvelope(
        run_id=new_run_id(),
        root_agent="ops",
        task="delete u-100",
        created_at=time.time(),
        conversation=Conversation(channel="C1", requester="UALICE", thread="1.1"),
        round=1,
    )
    created = await store.create(envelope)
    assert created is not None
    run = keys.run(envelope.run_id)
    await redis.hset(run, mapping={rr.STATUS: "ready", rr.ROUND: "1", rr.FINAL: "not yet"})
    await redis.hset(run, rr.JOURNAL + "c1", b'{"tool": "t", "output": "done"}')

    claim = await store.claim(envelope.run_id, kind="resume", round_=1)
    assert claim.status == "claimed" and claim.lease is not None and claim.hash is not None
    before = await hgetalls(redis)
    loaded = await store.load(envelope.run_id, claimed=claim)
    assert await hgetalls(redis) == before, "loaded from the claim's reply, not read again"

    # The same run a read of the hash gives now, the claim's own writes included.
    assert await redis.hget(run, rr.FENCE) == str(claim.lease.fence).encode()
    assert claim.hash[rr.FENCE] == str(claim.lease.fence).encode()
    assert claim.hash[rr.STATUS] == b"resuming"
    assert loaded == await store.load(envelope.run_id)
    assert loaded is not None and loaded.status == "resuming"
    assert loaded.journal == {"c1": b'{"tool": "t", "output": "done"}'}
    assert loaded.final_output == "not yet"

    # A start's claim carries no hash: its delivery holds what it loaded before.
    await redis.hset(run, rr.STATUS, "running")
    started = await store.claim(envelope.run_id, kind="start", round_=0)
    assert started.status == "claimed" and started.hash is None
