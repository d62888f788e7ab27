"""The key layout across shards, and the job queue and audit trail on a real Redis Cluster.

Without `REDIS_CLUSTER` the key names must be those of every earlier version (a deploy must find
the runs it stored); on a cluster every script's keys must hash to one slot.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.crc import key_slot

from runtime.audit.trail import AuditTrail
from runtime.db.cluster import connect_cluster
from runtime.db.keys import Keys
from runtime.jobs.consumer import JobConsumer
from runtime.jobs.queue import START, Delivery, JobQueue
from runtime.settings import RuntimeSettings
from tests.support.redis_cluster import LocalCluster

RUN_IDS = ["r" + hashlib.sha256(str(n).encode()).hexdigest()[:16] for n in range(200)]
"""Run ids as `runtime.record.layout.new_run_id` makes them: 16 hex digits of a hash."""


def slot(key: str) -> int:
    return int(key_slot(key.encode()))


def test_without_a_cluster_the_key_names_are_those_of_every_earlier_version() -> None:
    keys = Keys("countersign:")
    assert [s.index for s in keys.shards] == [0]
    assert keys.run("r1") == "countersign:run:r1"
    assert keys.tombstone("r1") == "countersign:done:r1"
    assert keys.grants.grant("g0123456789") == "countersign:grant:g0123456789"
    assert keys.jobs == "countersign:jobs"
    assert keys.dead_jobs == "countersign:jobs:dead"
    assert keys.job_marker("start:r1") == "countersign:job:start:r1"
    assert keys.deadlines == "countersign:deadlines"
    assert keys.reminders == "countersign:reminders"
    assert keys.live_runs == "countersign:live"
    assert keys.audit == "countersign:audit"
    assert keys.grants.of_channel("C1") == "countersign:grants:C1"
    assert keys.slack.group_members("S1") == "countersign:group:S1"
    assert keys.slack.group_generation("S1") == "countersign:group-generation:S1"
    assert keys.shard_of("r1").run("r1") == keys.run("r1")
    settings = RuntimeSettings.from_environ({"REDIS_KEY_PREFIX": "countersign:"})
    assert Keys.of(settings) == keys


def test_on_a_cluster_each_runs_keys_and_its_shards_structures_share_one_slot() -> None:
    keys = Keys("countersign:", 16, cluster=True)
    used = set()
    for run_id in RUN_IDS:
        shard = keys.shard_of(run_id)
        used.add(shard.index)
        grant_id = keys.grants.new_id(run_id)
        decide = [
            keys.run(run_id),
            shard.deadlines,
            shard.jobs,
            shard.audit,
            shard.reminders,
            keys.grants.grant(grant_id),
            shard.channel_grants("C1"),
        ]
        close = [shard.live_runs, keys.tombstone(run_id), shard.job_marker(f"start:{run_id}")]
        due = [Keys.parked(shard.deadlines), Keys.due_tries(shard.reminders), shard.dead_jobs]
        assert {slot(key) for key in decide + close + due} == {slot(keys.run(run_id))}
    assert used == set(range(16)), "runs spread over every shard"
    assert len({slot(shard.jobs) for shard in keys.shards}) == 16
    assert slot(keys.slack.group_members("S1")) == slot(keys.slack.group_generation("S1"))
    assert slot(keys.slack.channel_members("C1")) == slot(keys.slack.channel_generation("C1"))
    with pytest.raises(ValueError, match="per shard"):
        _ = keys.audit


def test_shards_are_for_a_cluster_only() -> None:
    with pytest.raises(ValidationError, match="REDIS_CLUSTER"):
        RuntimeSettings.from_environ({"REDIS_SHARDS": "4"})
    settings = RuntimeSettings.from_environ({"REDIS_CLUSTER": "true"})
    assert Keys.of(settings) == Keys("countersign:", 16, cluster=True)
    settings = RuntimeSettings.from_environ({"REDIS_CLUSTER": "true", "REDIS_SHARDS": "4"})
    assert settings.shard_count == 4


@pytest.fixture
async def cluster_client(redis_cluster: LocalCluster, prefix: str) -> AsyncIterator[aioredis.Redis]:
    client = connect_cluster(redis_cluster.url)
    await client.ping()
    yield client
    await client.aclose()
    redis_cluster.delete_prefix(prefix)


@pytest.mark.cluster
async def test_workers_take_jobs_from_every_shard_and_take_over_a_dead_ones(
    cluster_client: aioredis.Redis, prefix: str
) -> None:
    keys = Keys(prefix, 8, cluster=True)
    queue = JobQueue(cluster_client, keys)
    await queue.ensure_group()
    run_ids = RUN_IDS[:24]
    assert len({keys.shard_of(r).index for r in run_ids}) == 8
    for run_id in run_ids:
        assert await queue.enqueue(f"start:{run_id}", run_id, run_id=run_id)
    assert not await queue.enqueue(f"start:{run_ids[0]}", "again", run_id=run_ids[0])

    # A worker that dies holding a few jobs: read, never acknowledged. Reads of every shard
    # stay in flight between calls, so the dead worker may hold more than it was handed; on a
    # busy machine one 200 ms window can pass with nothing collected, so it reads until it has
    # three, each call waiting long enough.
    held: list[Delivery] = []
    async with asyncio.timeout(10):
        while len(held) < 3:
            held += await queue.read("dead", 3 - len(held), 2000)
    assert len(held) == 3

    done: list[str] = []
    all_done = asyncio.Event()

    async def handle(delivery: Delivery) -> None:
        done.append(delivery.payload)
        if len(done) >= len(run_ids):
            all_done.set()

    async def nothing(_: Delivery) -> None: ...

    survivor = JobConsumer(
        queue=JobQueue(cluster_client, keys),
        consumer="alive",
        handler=handle,
        on_dead=nothing,
        concurrency=2,
        idle_timeout=0.6,
        max_deliveries=3,
        block_ms=200,
    )
    running = asyncio.get_running_loop().create_task(survivor.run())
    try:
        async with asyncio.timeout(20):
            await all_done.wait()
    finally:
        survivor.stop()
        await running
    assert sorted(done) == sorted(run_ids), "each job ran once, the dead worker's taken over"
    for shard in keys.shards:
        assert await cluster_client.xlen(shard.jobs) == 0, "all acknowledged"
    reclaimed = await queue.reclaim("late", 0, 10, START)
    assert reclaimed.deliveries == []


@pytest.mark.cluster
async def test_the_audit_export_merges_every_shard_by_time(
    cluster_client: aioredis.Redis, prefix: str
) -> None:
    keys = Keys(prefix, 8, cluster=True)
    trail = AuditTrail(cluster_client, keys)
    run_ids = RUN_IDS[:12]
    for number, run_id in enumerate(run_ids):
        await trail.record("started", run_id, number=number)
        await asyncio.sleep(0.002)  # entries of one millisecond in two shards have no order
    assert len({keys.shard_of(r).index for r in run_ids}) > 4

    exported = [entry async for entry in trail.since(dt.datetime(1970, 1, 1, tzinfo=dt.UTC))]
    assert [entry.run_id for entry in exported] == run_ids
    recent = await trail.recent(5)
    assert [entry.run_id for entry in recent] == run_ids[-5:]
    assert [entry.run_id for entry in await trail.for_run(run_ids[3])] == [run_ids[3]]
    oldest = await trail.oldest()
    assert oldest is not None and oldest <= dt.datetime.now(dt.UTC)
