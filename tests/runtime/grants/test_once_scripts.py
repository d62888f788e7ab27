"""A script call whose reply is lost takes effect once, on a real Redis paused with SIGSTOP.

redis-py sends a call again when its reply times out; a Redis that was only paused then runs
every copy it received. Each test pauses its own Redis past the client's socket timeout while
one call is in flight, continues it, and counts what a person auditing would count.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.calls.digest import call_digest
from runtime.db.connection import ClientOptions, connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.decisions.recorder import Choice, DecisionRecorder
from runtime.grants.store import Grant, GrantStore
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.leases import Lease
from runtime.record.store import RunStore

TIMEOUT = 0.5
"""The client's socket timeout: the pause outlasts it, so redis-py sends the call again."""
KEYS = Keys("once:")


@pytest.fixture
async def paused_redis(tmp_path: Path) -> AsyncIterator[tuple[RedisServer, aioredis.Redis]]:
    """A Redis of the test's own, and a client built as every process builds its own."""
    server = RedisServer(directory=tmp_path / "redis")
    server.start()
    client = connect(
        server.url, ClientOptions(socket_timeout=TIMEOUT, connect_timeout=TIMEOUT, retries=3)
    )
    try:
        yield server, client
    finally:
        server.signal(signal.SIGCONT)
        await client.aclose()
        server.stop()


async def through_a_pause(server: RedisServer, call: Awaitable[Any]) -> Any:
    """`call`, sent to a Redis paused for longer than the client's timeout, then continued
    while redis-py sends it again."""
    server.signal(signal.SIGSTOP)
    task = asyncio.ensure_future(call)
    try:
        await asyncio.sleep(TIMEOUT * 1.6)  # timed out once; the retry's connection waits
    finally:
        server.signal(signal.SIGCONT)
    return await task


async def audit_events(client: aioredis.Redis, run_id: str) -> list[str]:
    rows: Any = await client.xrange(KEYS.shard_of(run_id).audit)
    return [fields[b"event"].decode() for _, fields in rows if fields[b"run_id"] == run_id.encode()]


async def settled(client: aioredis.Redis) -> None:
    """Every copy the paused Redis received has run (the connections it read are served)."""
    await client.ping()
    await asyncio.sleep(0.2)


async def stored_grant(client: aioredis.Redis) -> Grant:
    """An hour's grant of `delete_user` in #ops by bob, as the decision script stores one."""
    now = time.time()
    grant = Grant(
        id="g0123456789",
        scope="tool",
        channel="COPS",
        agent="ops",
        tool="delete_user",
        user_id="UBOB",
        at=now,
        ends_at=now + 3600,
        seconds=3600,
        run_id="rgrantor",
        approval_id="a1",
    )
    await client.hset(
        KEYS.grants.grant(grant.id), mapping={"grant": grant.model_dump_json(), "uses": 0}
    )
    return grant


async def test_a_grant_use_whose_reply_was_lost_is_counted_once(
    paused_redis: tuple[RedisServer, aioredis.Redis],
) -> None:
    server, client = paused_redis
    grants = GrantStore(client, KEYS)
    grant = await stored_grant(client)
    await grants.use(
        grant, "rwarm", call_id="call_1"
    )  # the script is loaded: the paused call is one EVALSHA

    used = await through_a_pause(server, grants.use(grant, "rpaused", call_id="call_1"))
    await settled(client)

    assert used is not None and used.uses == 2
    assert await client.hget(KEYS.grants.grant(grant.id), "uses") == b"2", "each call counted once"
    assert await audit_events(client, "rpaused") == ["grant_used"]


async def test_a_tool_output_whose_reply_was_lost_is_audited_once(
    paused_redis: tuple[RedisServer, aioredis.Redis],
) -> None:
    server, client = paused_redis
    store = RunStore(client, KEYS)
    run_id = "rjournal"
    await client.hset(KEYS.run(run_id), "status", "resuming")
    await store.journal_put(run_id, "warm", json.dumps({"tool": "t", "output": "ok"}))
    executed = AuditTrail.entry(AuditEvent.EXECUTED, run_id, call_id="call_pay", tool="pay")
    entry = json.dumps({"tool": "pay", "output": "paid"})

    await through_a_pause(server, store.journal_put(run_id, "call_pay", entry, audit=executed))
    await settled(client)

    assert await audit_events(client, run_id) == ["executed"]
    assert await client.hget(KEYS.run(run_id), "journal:call_pay") == entry.encode()


async def test_a_claim_whose_reply_was_lost_holds_the_fence_it_answers(
    paused_redis: tuple[RedisServer, aioredis.Redis],
) -> None:
    """The scripts of a run's hash keep their reply in it: a copy of a resume's claim answers
    the fence the first one wrote, instead of fencing off the delivery that sent it."""
    server, client = paused_redis
    store = RunStore(client, KEYS)
    run_id = "rclaim"
    await client.hset(KEYS.run(run_id), mapping={"status": "ready", "round": 1, "fence": 5})
    await store.claim("rwarm", kind="resume", round_=1)  # loaded: the paused call is one EVALSHA

    claim = await through_a_pause(server, store.claim(run_id, kind="resume", round_=1))
    await settled(client)

    assert claim.status == "claimed" and claim.lease is not None
    assert claim.hash is None, "a copy's reply carries no hash: the delivery reads the run"
    assert await client.hget(KEYS.run(run_id), "fence") == str(claim.lease.fence).encode()
    assert await audit_events(client, run_id) == ["resumed"]


async def test_a_close_whose_reply_was_lost_is_audited_once(
    paused_redis: tuple[RedisServer, aioredis.Redis],
) -> None:
    """A close deletes the hash its reply would be kept in: a copy answers from the tombstone."""
    server, client = paused_redis
    store = RunStore(client, KEYS)
    run_id = "rclose"
    await client.hset(KEYS.run(run_id), mapping={"status": "finishing", "fence": 7})
    await store.close("rwarm", lease=None, outcome="finished")  # the script is loaded
    finished = AuditTrail.entry(AuditEvent.FINISHED, run_id, rounds=1)

    lease = Lease(run_id=run_id, fence=7)
    await through_a_pause(
        server, store.close(run_id, lease=lease, outcome="finished", audit=finished)
    )
    await settled(client)

    assert await audit_events(client, run_id) == ["finished"]
    assert await client.exists(KEYS.run(run_id)) == 0
    assert await client.get(KEYS.tombstone(run_id)) == b"finished"


async def test_a_call_a_grant_covered_already_is_answered_as_then_not_counted_again(
    paused_redis: tuple[RedisServer, aioredis.Redis],
) -> None:
    """A job redelivered after its worker died replays the same model turn, whose call the
    grant covered already: the grant answers as it did, with one use and one audit entry."""
    _server, client = paused_redis
    grants = GrantStore(client, KEYS)
    grant = await stored_grant(client)

    first = await grants.use(grant, "rreplayed", call_id="call_del")
    again = await grants.use(grant, "rreplayed", call_id="call_del")
    other = await grants.use(grant, "rreplayed", call_id="call_del_2")

    assert first is not None and again is not None and other is not None
    assert (first.uses, again.uses, other.uses) == (1, 1, 2)
    assert await client.hget(KEYS.grants.grant(grant.id), "uses") == b"2"
    assert await audit_events(client, "rreplayed") == ["grant_used", "grant_used"]


async def waiting_calls(store: RunStore, run_id: str, count: int = 1) -> list[PendingCall]:
    """A run of `run_id` waiting for `count` approvals, each by UANN."""
    envelope = RunEnvelope(
        run_id=run_id,
        root_agent="ops",
        task="t",
        created_at=time.time(),
        conversation=Conversation(channel="COPS", requester="UREQ", thread="1.1"),
    )
    await store.create(envelope)
    lease = (await store.claim(run_id, kind="start", round_=0)).lease
    assert lease is not None
    calls = [
        PendingCall(
            approval_id=new_approval_id(),
            call_id=f"call_del_{n}",
            tool="delete_user",
            agent="ops",
            arguments=json.dumps({"user": f"u-{n}"}),
            expires_at=await store.server_time() + 60,
            approvers=("UANN",),
            digest=call_digest("delete_user", json.dumps({"user": f"u-{n}"})),
        )
        for n in range(count)
    ]
    waiting = envelope.model_copy(update={"round": 1, "calls": tuple(calls)})
    await store.wait_for_approvals(
        waiting, "{}", lease=lease, previous=envelope, reminders={}, self_ok=False
    )
    return calls


async def kept_replies(client: aioredis.Redis, run_id: str) -> int:
    """How many take-once replies the run's hash keeps (`once:<token>`)."""
    fields: Any = await client.hkeys(KEYS.run(run_id))
    return sum(f.startswith(b"once:") for f in fields)


async def test_a_decision_whose_reply_was_lost_answers_recorded_from_the_run(
    paused_redis: tuple[RedisServer, aioredis.Redis],
) -> None:
    """The decision script keeps its reply in the run's hash, with the decision: a copy of the
    click answers `recorded` (not `decided`, which would tell the clicker someone decided first),
    with one audit entry and one resume job, and no token key of its own."""
    server, client = paused_redis
    store, recorder = RunStore(client, KEYS), DecisionRecorder(client, KEYS)
    run_id = new_run_id()
    [call] = await waiting_calls(store, run_id)
    view = await recorder.view(run_id, call.approval_id)
    opened = await recorder.check(view, "UANN", channel="COPS", member_of=(), seen=call.digest)
    assert opened.status == "open"  # the script is loaded: the paused call is one EVALSHA
    jobs = KEYS.shard_of(run_id).jobs
    queued = await client.xlen(jobs)
    approve = Choice(outcome="approved", user_id="UANN")
    kept = await kept_replies(client, run_id)

    result = await through_a_pause(
        server, recorder.decide(view, approve, channel="COPS", member_of=(), seen=call.digest)
    )
    await settled(client)

    assert result.status == "recorded" and result.resume_enqueued
    assert result.decision is not None and result.decision.user_id == "UANN"
    assert await audit_events(client, run_id) == ["approved"]
    assert await client.xlen(jobs) == queued + 1, "one resume"
    assert await kept_replies(client, run_id) == kept + 1, "the decision's reply, in the run"
    assert await client.keys(f"{KEYS.prefix}*once:*") == [], "no token key"
