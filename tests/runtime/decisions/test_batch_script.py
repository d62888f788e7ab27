"""The batch decision script on real Redis: every waiting call of a run decided in one step, or
none (a non-approver, a stale digest), never a call that needs a quorum; one resume job."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.calls.digest import call_digest
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.decisions.batch import BatchRecorder, BatchResult, waiting_views
from runtime.decisions.recorder import Choice, DecisionRecorder
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.store import RunStore


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


async def waiting_run(store: RunStore, *quorums: int) -> tuple[str, list[PendingCall]]:
    envelope = RunEnvelope(
        run_id=new_run_id(),
        root_agent="ops",
        task="t",
        created_at=time.time(),
        conversation=Conversation(channel="C1", requester="UREQ", thread="1.1"),
    )
    await store.create(envelope)
    lease = (await store.claim(envelope.run_id, kind="start", round_=0)).lease
    assert lease is not None
    calls = [
        PendingCall(
            approval_id=new_approval_id(),
            call_id=f"c{n}",
            tool="delete_user",
            agent="ops",
            arguments=json.dumps({"n": n}),
            expires_at=await store.server_time() + 60,
            approvers=("UANN",),
            quorum=quorum,
            digest=call_digest("delete_user", json.dumps({"n": n})),
        )
        for n, quorum in enumerate(quorums)
    ]
    waiting = envelope.model_copy(update={"round": 1, "calls": tuple(calls)})
    await store.wait_for_approvals(
        waiting, "{}", lease=lease, previous=envelope, reminders={}, self_ok=False
    )
    return envelope.run_id, calls


async def decide_all(
    redis: aioredis.Redis, keys: Keys, run_id: str, user: str, seen: dict[str, str]
) -> BatchResult:
    batch = BatchRecorder(redis=redis, keys=keys)
    views = await waiting_views(DecisionRecorder(redis, keys), run_id)
    choice = Choice(outcome="approved", user_id=user)
    return await batch.decide(run_id, views[0].round, choice, channel="C1", seen=seen, member_of={})


async def test_an_approver_approves_every_call_with_one_resume(
    redis: aioredis.Redis, prefix: str
) -> None:
    keys = Keys(prefix)
    run_id, calls = await waiting_run(RunStore(redis, keys), 1, 1)
    jobs_before = await redis.xlen(keys.shard_of(run_id).jobs)
    seen = {c.approval_id: c.digest for c in calls}
    result = await decide_all(redis, keys, run_id, "UANN", seen)
    assert result.status == "recorded"
    statuses = [r.status for r in result.results.values()]
    assert statuses == ["recorded", "recorded"]
    assert await redis.xlen(keys.shard_of(run_id).jobs) == jobs_before + 1
    entries: Any = await redis.xrange(keys.shard_of(run_id).audit)
    details = [json.loads(e[b"details"]) for _, e in entries if e[b"event"] == b"approved"]
    assert len(details) == 2 and len({d["batch"] for d in details}) == 1
    assert await waiting_views(DecisionRecorder(redis, keys), run_id) == []


async def test_a_non_approver_decides_nothing(redis: aioredis.Redis, prefix: str) -> None:
    keys = Keys(prefix)
    run_id, calls = await waiting_run(RunStore(redis, keys), 1, 1)
    seen = {c.approval_id: c.digest for c in calls}
    result = await decide_all(redis, keys, run_id, "UBOB", seen)
    assert result.status == "refused"
    assert set(result.refused.values()) == {"not_allowed"}
    assert len(await waiting_views(DecisionRecorder(redis, keys), run_id)) == 2


async def test_a_stale_digest_or_a_quorum_decides_nothing(
    redis: aioredis.Redis, prefix: str
) -> None:
    keys = Keys(prefix)
    run_id, calls = await waiting_run(RunStore(redis, keys), 1, 1)
    seen = {calls[0].approval_id: calls[0].digest, calls[1].approval_id: "0" * 64}
    result = await decide_all(redis, keys, run_id, "UANN", seen)
    assert result.status == "refused"
    assert result.refused == {calls[1].approval_id: "stale"}
    assert len(await waiting_views(DecisionRecorder(redis, keys), run_id)) == 2
    run_id, calls = await waiting_run(RunStore(redis, keys), 1, 2)
    seen = {c.approval_id: c.digest for c in calls}
    result = await decide_all(redis, keys, run_id, "UANN", seen)
    assert result.status == "not_offered"
    assert result.single == (calls[1].approval_id,)
