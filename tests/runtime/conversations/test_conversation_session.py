"""A thread's history on real Redis, one server and a Cluster: the SDK's `Session` protocol,
its cap (the newest kept) and its time to live."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from agents.memory import Session

from runtime.conversations.session import ThreadSession, conversation_id
from runtime.conversations.threads import ThreadHistory
from runtime.db.cluster import connect_cluster
from runtime.db.connection import ClientOptions, connect
from runtime.db.keys import Keys
from runtime.jobs.contracts import new_run_id, start_job_id
from tests.conftest import on_cluster_too


@pytest.fixture
async def client(redis_target: str, redis_mode: str) -> AsyncIterator[aioredis.Redis]:
    if redis_mode == "cluster":
        made = connect_cluster(redis_target, ClientOptions())
    else:
        made = connect(redis_target)
    yield made
    await made.aclose()


def session(client: aioredis.Redis, prefix: str, mode: str, **limits: int) -> ThreadSession:
    keys = Keys(prefix, 8, cluster=True) if mode == "cluster" else Keys(prefix)
    return ThreadSession(
        redis=client,
        keys=keys,
        session_id=conversation_id("C1", "1700000000.000100"),
        ttl_seconds=limits.get("ttl", 3600),
        max_items=limits.get("most", 5),
    )


def said(role: str, text: str) -> Any:
    return {"role": role, "content": text}


@on_cluster_too
async def test_turns_are_kept_in_order_and_read_back(
    client: aioredis.Redis, prefix: str, redis_mode: str
) -> None:
    history = session(client, prefix, redis_mode)
    assert isinstance(history, Session)
    assert await history.get_items() == []
    await history.add_items([said("user", "delete u-100"), said("assistant", "done")])
    await history.add_items([said("user", "and u-101?")])
    assert [item["content"] for item in await history.get_items()] == [  # type: ignore[typeddict-item]
        "delete u-100",
        "done",
        "and u-101?",
    ]
    assert await history.get_items(limit=1) == [said("user", "and u-101?")]
    assert await history.pop_item() == said("user", "and u-101?")
    assert len(await history.get_items()) == 2
    await history.clear_session()
    assert await history.get_items() == []
    assert await history.pop_item() is None


@on_cluster_too
async def test_only_the_newest_items_are_kept_and_each_turn_starts_the_ttl_again(
    client: aioredis.Redis, prefix: str, redis_mode: str
) -> None:
    history = session(client, prefix, redis_mode, most=3, ttl=600)
    await history.add_items([said("user", f"turn {n}") for n in range(2)])
    await history.add_items([said("user", f"turn {n}") for n in range(2, 6)])
    assert [item["content"] for item in await history.get_items()] == [  # type: ignore[typeddict-item]
        "turn 3",
        "turn 4",
        "turn 5",
    ]
    key = history.keys.conversation(history.session_id)
    assert 590 <= await client.ttl(key) <= 600
    await client.expire(key, 5)
    await history.add_items([said("user", "turn 6")])
    assert await client.ttl(key) > 5
    if redis_mode == "cluster":
        assert key.startswith("{")  # in its shard's slot, as every other key


@on_cluster_too
async def test_a_reply_that_took_the_turn_but_was_not_enqueued_gives_it_back(
    client: aioredis.Redis, prefix: str, redis_mode: str
) -> None:
    keys = Keys(prefix, 8, cluster=True) if redis_mode == "cluster" else Keys(prefix)
    history = ThreadHistory(redis=client, keys=keys, ttl_seconds=600, max_items=5)
    ended, reply, again = new_run_id(), new_run_id(), new_run_id()
    await history.remember("C1", "1.0", ended, "ops")
    await client.set(keys.tombstone(ended), "1")
    last = await history.last_run("C1", "1.0")
    assert last is not None and not await history.busy(last)

    assert await history.follow("C1", "1.0", ended, reply, "ops")
    taken = await history.last_run("C1", "1.0")
    assert taken is not None and taken.run_id == reply
    assert await history.busy(taken), "on its way before its job is enqueued"
    assert not await history.follow("C1", "1.0", ended, again, "ops"), "one turn at a time"

    await history.give_back("C1", "1.0", reply, last)  # its enqueue failed
    back = await history.last_run("C1", "1.0")
    assert back is not None and back.run_id == ended and not await history.busy(back)
    assert await history.follow("C1", "1.0", ended, again, "ops"), "the retry takes the turn"

    marker = keys.shard_of(again).job_marker(start_job_id(again))
    await client.set(marker, "1")  # it got in, only the answer was lost
    await history.give_back("C1", "1.0", again, last)
    kept = await history.last_run("C1", "1.0")
    assert kept is not None and kept.run_id == again
