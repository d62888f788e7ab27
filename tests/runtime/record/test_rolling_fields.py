"""A rolling deploy: what this version stores for a call that asks nothing new is readable by the
version before it, whose models refuse fields they do not know (`extra="forbid"`)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from runtime.calls.digest import call_digest
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.record import layout as rr
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.store import RunStore

# The fields the release before `when`/`confirm` knew (its `PendingCall` and `CallGate`).
PREVIOUS_CALL_FIELDS = set(
    [
        "approval_id",
        "call_id",
        "tool",
        "agent",
        "arguments",
        "expires_at",
        "approvers",
        "quorum",
        "allow_always",
        "digest",
        "mcp_server",
        "description",
        "message_ts",
        "decision",
        "approvals",
        "why",
        "preview",
        "params_schema",
        "allow_edit",
        "grant_max_seconds",
        "edit",
        "copies",
        "inside",
        "external",
        "lost",
    ]
)
PREVIOUS_GATE_FIELDS = set(
    [
        "v",
        "round",
        "call_id",
        "tool",
        "agent",
        "requester",
        "channel",
        "users",
        "groups",
        "anyone",
        "quorum",
        "allow_always",
        "self_ok",
        "digest",
        "mcp_server",
        "allow_edit",
        "grant_max_seconds",
        "external",
    ]
)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


async def stored(redis: aioredis.Redis, prefix: str, **rule: object) -> tuple[set[str], set[str]]:
    """The keys of the call in the stored envelope, and of its gate."""
    keys = Keys(prefix)
    store = RunStore(redis, keys)
    envelope = RunEnvelope(
        run_id=new_run_id(),
        root_agent="ops",
        task="t",
        created_at=time.time(),
        conversation=Conversation(channel="C1", requester="UALICE", thread="1.1"),
    )
    await store.create(envelope)
    lease = (await store.claim(envelope.run_id, kind="start", round_=0)).lease
    assert lease is not None
    arguments = json.dumps({"order_id": "o-1", "amount_cents": 1200})
    call = PendingCall(
        approval_id=new_approval_id(),
        call_id="c",
        tool="refund_order",
        agent="ops",
        arguments=arguments,
        expires_at=await store.server_time() + 60,
        approvers=("UBOB",),
        digest=call_digest("refund_order", arguments),
        **rule,  # type: ignore[arg-type]
    )
    waiting = envelope.model_copy(update={"round": 1, "calls": (call,)})
    await store.wait_for_approvals(
        waiting, "{}", lease=lease, previous=envelope, reminders={}, self_ok=False
    )
    run = keys.run(envelope.run_id)
    envelope_json, gate_json = await redis.hmget(run, [rr.ENVELOPE, rr.GATE + call.approval_id])
    assert envelope_json is not None and gate_json is not None
    [stored_call] = json.loads(envelope_json)["calls"]
    gate = json.loads(gate_json)
    return set(stored_call), set(gate)


async def test_a_call_that_asks_nothing_new_is_stored_as_the_previous_version_reads_it(
    redis: aioredis.Redis, prefix: str
) -> None:
    call_fields, gate_fields = await stored(redis, prefix)
    assert call_fields - PREVIOUS_CALL_FIELDS == set()
    assert gate_fields - PREVIOUS_GATE_FIELDS == set()


async def test_a_typed_confirmation_is_stored_for_the_versions_that_know_it(
    redis: aioredis.Redis, prefix: str
) -> None:
    call_fields, gate_fields = await stored(
        redis, prefix, when="args.amount_cents > 1000", confirm="order_id"
    )
    assert {"when", "confirm"} <= call_fields
    assert {"confirm", "confirm_value"} <= gate_fields
