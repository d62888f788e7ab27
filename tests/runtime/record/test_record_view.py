"""The typed views of the run record (`runtime.record.view`, `runtime.record.reads`): one command
per read, asking only for the fields the view names, each parsed as the reads module says."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.jobs.contracts import Conversation
from runtime.record import layout as rr
from runtime.record.envelope import RunEnvelope, UnreadableEnvelope, dump_envelope
from runtime.record.reads import (
    CallRead,
    GateRead,
    JournalRead,
    LiveRead,
    Nudges,
    Place,
    TurnRead,
    Whole,
)
from runtime.record.view import of_queued, queue, read, read_whole

KEYS = Keys("view:")


@pytest.fixture
async def redis(own_redis: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(own_redis.url)
    yield client
    await client.aclose()


async def commands(redis: aioredis.Redis) -> dict[str, int]:
    stats: Any = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(entry["calls"]) for name, entry in stats.items()}


async def sent_by(redis: aioredis.Redis, before: dict[str, int]) -> dict[str, int]:
    after = await commands(redis)
    sent = {name: calls - before.get(name, 0) for name, calls in after.items()}
    sent["info"] -= 1  # the INFO that read `after`
    return {name: calls for name, calls in sent.items() if calls}


async def test_a_read_is_one_command_for_its_fields_only(redis: aioredis.Redis) -> None:
    await redis.hset(
        KEYS.run("r1"),
        mapping={
            rr.CHANNEL: "C1",
            rr.REQUESTER: "U1",
            rr.THREAD: "1.1",
            rr.REPLY_URL: "",
            rr.STARTED + "c1": "3",
            rr.TURN + "0:d1": "a response",
            rr.NUDGED + "a1": "12.5",
            rr.GATE + "a1": "not a gate",
        },
    )
    before = await commands(redis)
    place = await read(redis, KEYS, Place, "r1")
    assert await sent_by(redis, before) == {"hmget": 1}
    where = (place.channel, place.requester, place.thread, place.reply_url)
    assert where == ("C1", "U1", "1.1", "")

    before = await commands(redis)
    turn = await read(redis, KEYS, TurnRead, "r1", "0:d1")
    assert await sent_by(redis, before) == {"hget": 1}, "one field: an HGET, as before"
    assert turn.response == b"a response"
    before = await commands(redis)
    started = await read(redis, KEYS, JournalRead, "r1", "c1")
    assert await sent_by(redis, before) == {"hmget": 1}
    assert (started.started, started.recorded) == (3, None)

    nudges = await read(redis, KEYS, Nudges, "r1", "a1")
    assert (nudges.nudged, nudges.gate, nudges.has_reach) == (12.5, None, False)
    stored = await read(redis, KEYS, GateRead, "r1", "a1")
    assert (stored.written, stored.gate) == (b"not a gate", None)
    assert GateRead.names("a1") == [rr.GATE + "a1"], "a field named twice is asked for once"

    before = await commands(redis)
    async with redis.pipeline(transaction=False) as pipe:
        for run_id in ("r1", "r2"):  # r2: no such run
            queue(pipe, KEYS, Place, run_id)
        replies: list[Any] = await pipe.execute()
    assert await sent_by(redis, before) == {"hmget": 2}
    pairs = zip(("r1", "r2"), replies, strict=True)
    first, second = (of_queued(Place, run_id, reply) for run_id, reply in pairs)
    assert (first.channel, second.channel) == ("C1", None)


async def test_an_envelope_this_version_cannot_read_hides_nothing_else(
    redis: aioredis.Redis,
) -> None:
    await redis.hset(
        KEYS.run("r3"),
        mapping={
            rr.ENVELOPE: '{"schema_version": 999}',
            rr.STATUS: "waiting",
            rr.CHANNEL: "C1",
            rr.REQUESTER: "U1",
            rr.TS + "a1": "5.5",
            rr.EDIT + "a1": '{"from": "a newer version"}',
        },
    )
    live = await read(redis, KEYS, LiveRead, "r3")
    assert (live.envelope, live.status, live.channel) == (None, "waiting", "C1")
    assert not live.stopped
    call = await read(redis, KEYS, CallRead, "r3", "a1")
    assert (call.exists, call.envelope, call.message_ts) == (True, None, "5.5")
    whole = await read_whole(redis, KEYS, Whole, "r3")
    assert whole.readable_envelope is None and whole.message_ts == {"a1": "5.5"}
    with pytest.raises(UnreadableEnvelope, match="r3"):
        _ = whole.envelope
    with pytest.raises(ValueError):
        _ = call.edit  # a field is parsed when asked for, and an unreadable edit is no edit


async def test_a_readable_envelope_is_read_with_the_view(redis: aioredis.Redis) -> None:
    envelope = RunEnvelope(
        run_id="r0123456789abcdef",
        root_agent="ops",
        task="t",
        created_at=1.0,
        conversation=Conversation(channel="C1", requester="U1"),
    )
    await redis.hset(
        KEYS.run("r0123456789abcdef"),
        mapping={rr.ENVELOPE: dump_envelope(envelope), rr.STATUS: "running", rr.CHANNEL: "C1"},
    )
    live = await read(redis, KEYS, LiveRead, "r0123456789abcdef")
    assert live.envelope is not None and live.envelope.root_agent == "ops"
    assert live.envelope is live.envelope, "parsed once"


def test_a_view_of_every_call_is_read_whole() -> None:
    with pytest.raises(TypeError, match="whole"):
        Whole.names()
