"""Clocks that disagree: the web and the worker run with their clocks hours ahead or behind
(libfaketime, `LD_PRELOAD` and `FAKETIME`), and what decides follows Redis's clock.

Deadlines, reminders and escalations were set and checked on Redis's clock already (each in the
script that records them). What these tests pin down are the places that read the process's own
clock: the audit trail's times and its trimming, the grants a call may use, and how long a reply
that took a thread's turn counts as on its way. Each test fails with that read on the local
clock. Real processes under a skewed clock take a minute or two together, so they are marked
`chaos`. Without libfaketime (`apt-get install faketime`, which `scripts/dev.py test` does as root)
they are skipped, saying so.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.conversations.threads import ThreadHistory
from runtime.db.keys import Keys
from tests.runtime.grants.test_grants import grant_options
from tests.support.deployment import Deployment
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import ROOT, wait_for_log

LIBFAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))), None)
needs_faketime = pytest.mark.skipif(
    LIBFAKETIME is None,
    reason="no libfaketime: `apt-get install faketime` (scripts/dev.py test does, as root)",
)
pytestmark = [needs_faketime, pytest.mark.chaos]
AGREE_WITHIN = 30.0
"""Seconds within which a time written under a skewed clock must agree with Redis's."""


def skewed(offset: str) -> dict[str, str]:
    """The environment that runs a process with its clock `offset` off (`+2h`, `-3m`)."""
    return {
        "LD_PRELOAD": LIBFAKETIME or "",
        "FAKETIME": offset,
        # Monotonic clocks only measure spans: left alone, as a wrong wall clock leaves them.
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


async def skewed_worker(deployment: Deployment, offset: str, **env: str) -> None:
    worker = deployment.worker("worker.1", **skewed(offset), **env)
    await wait_for_log(worker, "worker ready", timeout=60)


async def audit_until(deployment: Deployment, event: str, timeout: float = 10) -> Any:
    """The audit stream's rows once `event` is among them (it follows the answer's posting)."""
    deadline = time.monotonic() + timeout
    while True:
        rows: Any = await deployment.redis.xrange(deployment.keys.audit)
        if any(fields[b"event"] == event.encode() for _, fields in rows):
            return rows
        assert time.monotonic() < deadline, f"no {event} in the audit trail"
        await asyncio.sleep(0.1)


def written_at(entry_id: bytes) -> float:
    """When Redis appended a stream entry: its id counts milliseconds on Redis's clock."""
    return int(entry_id.decode().split("-")[0]) / 1000


async def test_the_audit_trail_keeps_redis_time_from_a_worker_hours_ahead(
    deployment: Deployment,
) -> None:
    deployment.model.script = delete_then_answer
    # The web within Slack's five-minute window for signed requests, the worker far out of it.
    await deployment.web(**skewed("-3m"))
    await skewed_worker(deployment, "+2h")
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)
    status, _ = await deployment.sender.click(card, "approve", user="UBOB")
    assert status == 200
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    rows = await audit_until(deployment, "finished")
    events = {}
    for entry_id, fields in rows:
        at = float(json.loads(fields[b"details"])["at"])
        events[fields[b"event"].decode()] = at - written_at(entry_id)
    assert {"started", "requested", "approved", "executed", "finished"} <= set(events)
    off = {event: round(seconds) for event, seconds in events.items()}
    assert all(abs(seconds) < AGREE_WITHIN for seconds in events.values()), off


async def test_a_grant_covers_calls_on_a_worker_whose_clock_is_past_its_end(
    deployment: Deployment,
) -> None:
    """An hour's grant, and a worker two hours ahead: on Redis's clock the grant is on, so the
    next call runs under it, without a card."""
    deployment.model.script = delete_then_answer
    await deployment.web()
    await skewed_worker(deployment, "+2h")
    first = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(first, 1)
    hour = next(value for text, value in grant_options(card).items() if "1 hour" in text)
    await deployment.sender.choose_grant(card, hour, user="UBOB")
    await deployment.final_answers(first)
    second = await deployment.start_run("delete u-100 again")
    [answer] = await deployment.final_answers(second)
    assert answer.text == "done: deleted u-100"
    assert [c for c in deployment.slack.cards() if c.thread_ts == second.ts] == []
    ledger: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    assert [json.loads(entry)["tool"] for entry in ledger] == ["delete_user", "delete_user"]


async def test_a_worker_days_ahead_trims_nothing_written_today(deployment: Deployment) -> None:
    """`AUDIT_RETENTION_DAYS=1` and a worker three days ahead: what was written today stays."""
    deployment.model.script = delete_then_answer
    await deployment.web()
    on_time = deployment.worker("worker.1")
    await wait_for_log(on_time, "worker ready", timeout=60)
    await approved_run(deployment, "delete u-100")
    before = [fields[b"event"] for _, fields in await audit_until(deployment, "finished")]
    on_time.stop()
    await skewed_worker(deployment, "+3d", AUDIT_RETENTION_DAYS="1")
    # The trimmer runs as the worker starts; a run through it shows that it is long up.
    await approved_run(deployment, "delete u-100 again")
    rows: Any = await deployment.redis.xrange(deployment.keys.audit)
    kept = [fields[b"event"] for _, fields in rows]
    assert kept[: len(before)] == before, kept


async def approved_run(deployment: Deployment, text: str) -> None:
    root = await deployment.start_run(text)
    [card] = await deployment.cards(root, 1)
    status, _ = await deployment.sender.click(card, "approve", user="UBOB")
    assert status == 200
    await deployment.final_answers(root)


FOLLOW = """
import asyncio, sys
import redis.asyncio as aioredis
from runtime.conversations.threads import ThreadHistory
from runtime.db.keys import Keys

async def main(url: str, prefix: str) -> None:
    redis = aioredis.Redis.from_url(url)
    history = ThreadHistory(redis=redis, keys=Keys(prefix), ttl_seconds=600, max_items=10)
    await history.remember("CGENERAL", "1.0", "rfirst", "ops")
    assert await history.follow("CGENERAL", "1.0", "rfirst", "rreply", "ops")
    await redis.aclose()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_a_reply_that_took_the_turn_on_a_web_minutes_behind_keeps_it(
    redis_url: str, prefix: str
) -> None:
    """A web ten minutes behind takes a thread's turn for a reply's run; another web, on time,
    sees that run on its way (not yet enqueued), so a second reply waits rather than starting a
    second run in the thread."""
    environ = {**os.environ, **skewed("-10m"), "PYTHONPATH": str(ROOT)}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", FOLLOW, redis_url, prefix],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    redis = aioredis.Redis.from_url(redis_url)
    try:
        history = ThreadHistory(redis=redis, keys=Keys(prefix), ttl_seconds=600, max_items=10)
        last = await history.last_run("CGENERAL", "1.0")
        assert last is not None and last.run_id == "rreply"
        assert last.taken_at is not None and abs(last.taken_at - time.time()) < AGREE_WITHIN
        assert await history.busy(last)
    finally:
        await redis.aclose()
