"""The wait drops the fields it is told to, looking none up: the answer a finishing delivery
wrote only when the hash has one (read with the wait's first read), the model turns by name."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.calls.digest import call_digest
from runtime.db.keys import Keys
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.record import layout as rr
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.store import RunStore


@pytest.fixture
def redis(own_client: aioredis.Redis) -> aioredis.Redis:
    """A Redis of the test's own: the commands it counts are the test's alone."""
    return own_client


async def hdels(redis: aioredis.Redis) -> int:
    stats: Any = await redis.info("commandstats")
    return int(stats.get("cmdstat_hdel", {}).get("calls", 0))


@pytest.mark.parametrize("answered", [False, True])
async def test_a_first_wait_drops_the_answer_only_when_there_is_one(
    redis: aioredis.Redis, answered: bool
) -> None:
    keys = Keys("t:")
    store = RunStore(redis, keys)
    envelope = RunEnvelope(
        run_id=new_run_id(),
        root_agent="ops",
        task="t",
        created_at=time.time(),
        conversation=Conversation(channel="C1", requester="UALICE", thread="1.1"),
    )
    created = await store.create(envelope)
    assert created is not None and created.lease is not None
    run = keys.run(envelope.run_id)
    await redis.hset(run, rr.TURN + "k1", "a turn")
    if answered:
        await redis.hset(run, rr.FINAL, "an answer")
    arguments = json.dumps({"user_id": "u-1"})
    call = PendingCall(
        approval_id=new_approval_id(),
        call_id="c1",
        tool="delete_user",
        agent="ops",
        arguments=arguments,
        expires_at=await store.server_time() + 60,
        approvers=("UBOB",),
        digest=call_digest("delete_user", arguments),
    )
    waiting = envelope.model_copy(update={"round": 1, "calls": (call,)})
    before = await hdels(redis)
    await store.wait_for_approvals(
        waiting,
        "{}",
        lease=created.lease,
        previous=envelope,
        reminders={},
        self_ok=False,
        turns=frozenset({"k1"}),
    )
    assert await hdels(redis) == before + 1, "one HDEL: the turn, and the answer if any"
    assert await redis.hmget(run, [rr.TURN + "k1", rr.FINAL, rr.STATUS]) == [
        None,
        None,
        b"waiting",
    ]
    if not answered:
        # Nothing to drop at all: no HDEL.
        envelope_again = waiting.model_copy(update={"round": 2})
        before = await hdels(redis)
        await store.wait_for_approvals(
            envelope_again,
            "{}",
            lease=created.lease,
            previous=envelope,
            reminders={},
            self_ok=False,
            turns=frozenset(),
        )
        assert await hdels(redis) == before
