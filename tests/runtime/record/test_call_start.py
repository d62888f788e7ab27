"""A tool call about to run is looked up and marked started in one step
(`runtime/record/lua/start.lua`): the checks go in the order a separate read and mark made them,
and a copy of the call (redis-py sending it again) does not find its own mark and call it lost."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.record import layout as rr
from runtime.record import scripts as rs
from runtime.record.starts import CallStarts

RUN = "rstart"
STOP = b'{"user_id": "UALICE", "at": 1.0}'


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


async def begin(starts: CallStarts, **options: Any) -> tuple[str, bytes | None]:
    flags = {"run_again": False, "repeats": False, "stopping": False, **options}
    return await starts.begin(RUN, 7, "c1", 2, **flags)


async def test_a_call_is_marked_only_when_it_may_run(redis: aioredis.Redis, prefix: str) -> None:
    keys = Keys(prefix)
    starts = CallStarts(redis, keys)
    run = keys.run(RUN)
    await redis.hset(run, mapping={rr.FENCE: "7", rr.STATUS: "running"})

    assert await begin(starts, held=True) == ("missing", None)
    assert await redis.hget(run, rr.STARTED + "c1") is None, "nothing marked before a reuse"
    assert await begin(starts, stopping=True) == ("stopping", None)
    assert await begin(starts, turns={"k1": "turn"}) == ("marked", None)
    assert await redis.hmget(run, [rr.STARTED + "c1", rr.TURN + "k1"]) == [b"2", b"turn"]

    # Marked, no outcome: it may have run.
    assert await begin(starts) == ("lost", None)
    assert await begin(starts, run_again=True) == ("lost", None), "a start of the run allowed"
    assert await begin(starts, repeats=True) == ("marked", None)
    await redis.hset(run, rr.STARTED + "c1", "1")
    assert await begin(starts, run_again=True) == ("marked", None), "an earlier round's mark"
    await redis.hset(run, rr.STARTED + "c1", "")  # taken back: the tool did not start
    assert await begin(starts) == ("marked", None)

    await redis.hset(run, rr.STOPPED, STOP)
    assert await begin(starts) == ("stopped", STOP)
    await redis.hset(run, rr.FENCE, "8")
    assert await begin(starts) == ("fenced", None)
    await redis.hset(run, rr.JOURNAL + "c1", b'{"output": "done"}')
    assert await begin(starts) == ("recorded", b'{"output": "done"}'), "replayed first"
    await redis.delete(run)
    assert await begin(starts) == ("fenced", None), "gone"


async def test_a_copy_of_a_mark_answers_marked(redis: aioredis.Redis, prefix: str) -> None:
    keys = Keys(prefix)
    run = keys.run(RUN)
    await redis.hset(run, mapping={rr.FENCE: "7", rr.STATUS: "running"})
    start = rs.run_once(redis, rs.START)
    call = rs.Start(
        run=run,
        fence=7,
        call_id="c1",
        round=2,
        run_again="",
        repeats="",
        stopping="",
        held="",
        turns=[],
    )
    assert await start(call, token="t1") == [b"marked"]
    assert await start(call, token="t1") == [b"marked"], "the same call, sent again"
    assert await start(call, token="t2") == [b"lost"], "another attempt finds the mark"
