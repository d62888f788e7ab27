"""The audit trail keeps AUDIT_RETENTION_DAYS of events, however many clicks come in between."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from runtime.audit.trail import AuditTrail
from runtime.db.connection import connect
from runtime.db.keys import Keys
from tests.support.processes import ROOT

DAY_MS = 86_400_000


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


async def add_at(redis: aioredis.Redis, keys: Keys, event: str, days_ago: float) -> str:
    """An entry as if written `days_ago` (Redis takes the id we give it)."""
    millis = int(time.time() * 1000 - days_ago * DAY_MS)
    details = json.dumps({"at": millis / 1000})
    fields = {"event": event, "run_id": "r-old", "details": details}
    await redis.xadd(keys.audit, fields, id=f"{millis}-0")  # type: ignore[arg-type]
    return f"{millis}-0"


def run_export(
    redis_url: str, prefix: str, since: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`python -m runtime audit --since ...`, as an operator runs it."""
    environ = {**os.environ, "REDIS_URL": redis_url, "REDIS_KEY_PREFIX": prefix, **env}
    return subprocess.run(
        [sys.executable, "-m", "runtime", "audit", "--since", since],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def export(redis_url: str, prefix: str, since: str, **env: str) -> tuple[list[str], str]:
    """The exported events' names, and stderr."""
    done = run_export(redis_url, prefix, since, **env)
    return [json.loads(line)["event"] for line in done.stdout.splitlines()], done.stderr


async def test_a_flood_of_clicks_does_not_push_a_decision_out(
    redis: aioredis.Redis, prefix: str
) -> None:
    """Item 7 of issue 8: the trail used to be capped near 100,000 entries."""
    keys = Keys(prefix)
    trail = AuditTrail(redis, keys)
    await trail.record("approved", "r-1", user_id="UCAROL")
    flood = 100_200  # refused clicks, written in bulk: one round trip per 10,000
    fields = {"event": "denied", "run_id": "r-1", "details": json.dumps({"at": time.time()})}
    for start in range(0, flood, 10_000):
        async with redis.pipeline(transaction=False) as pipe:
            for _ in range(start, min(start + 10_000, flood)):
                pipe.xadd(keys.audit, fields)  # type: ignore[arg-type]
            await pipe.execute()
    await trail.record("denied", "r-1", user_id="UEVE")

    assert await redis.xlen(keys.audit) == flood + 2
    first = await anext(trail.since(dt.datetime(2000, 1, 1, tzinfo=dt.UTC)))
    assert (first.event, first.details["user_id"]) == ("approved", "UCAROL")


async def test_trimming_drops_exactly_the_events_past_the_retention(
    redis: aioredis.Redis, prefix: str
) -> None:
    keys = Keys(prefix)
    trail = AuditTrail(redis, keys)
    await add_at(redis, keys, "started", days_ago=200)
    await add_at(redis, keys, "approved", days_ago=91)
    kept = await add_at(redis, keys, "executed", days_ago=89)
    await trail.record("finished", "r-old")

    await trail.trim(retention_days=90)

    entries = [e async for e in trail.since(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))]
    assert [e.event for e in entries] == ["executed", "finished"]
    assert entries[0].id == kept


async def test_the_export_says_where_the_trail_starts(
    redis: aioredis.Redis, redis_url: str, prefix: str
) -> None:
    keys = Keys(prefix)
    entry_id = await add_at(redis, keys, "approved", days_ago=29.5)
    await AuditTrail(redis, keys).record("finished", "r-old")
    oldest = dt.datetime.fromtimestamp(int(entry_id.split("-")[0]) / 1000, dt.UTC)

    events, stderr = export(redis_url, prefix, "2000-01-01", AUDIT_RETENTION_DAYS="30")
    assert events == ["approved", "finished"]
    [note, summary] = stderr.splitlines()
    assert note == (
        f"The audit trail starts at {oldest.isoformat(timespec='seconds')} (events are kept "
        "AUDIT_RETENTION_DAYS=30 days), so nothing older was exported."
    )
    assert summary == "2 audit event(s) exported"

    later = (oldest + dt.timedelta(days=1)).date().isoformat()
    events, stderr = export(redis_url, prefix, later)
    assert events == ["finished"]
    assert stderr.splitlines() == ["1 audit event(s) exported"], "the range is all there"


async def test_the_export_of_an_empty_trail_says_so(redis_url: str, prefix: str) -> None:
    events, stderr = export(redis_url, prefix, "2026-01-01")
    assert events == []
    assert stderr.splitlines() == [
        "The audit trail is empty (events are kept AUDIT_RETENTION_DAYS=90 days), "
        "so nothing was exported.",
        "0 audit event(s) exported",
    ]
