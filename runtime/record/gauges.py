"""What Redis holds right now, read when Prometheus scrapes: open approvals by tool, the job
stream and the dead letters.

These are the truth for the whole deployment, not one process's view, so one scrape of any web
process tells it (dashboards take `max` across instances). A scrape costs a bounded number of
Redis commands: two pipelines, the second with one `HMGET` per sampled approval.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import redis.asyncio as aioredis
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from runtime.db.keys import Keys
from runtime.record.reads import PendingRead
from runtime.record.view import of_queued, queue

SAMPLE: Final = 500
"""Open approvals looked at per scrape (the soonest deadlines first)."""
UNSAMPLED: Final = "(unsampled)"
"""The `tool` label of open approvals beyond the sample: the by-tool series still sum to all."""
UNKNOWN_TOOL: Final = "(unknown)"
"""The `tool` label of an approval whose gate this version cannot read."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StateSnapshot:
    pending_by_tool: dict[str, int] = field(default_factory=dict)
    job_stream_length: int = 0
    oldest_job_age_seconds: float = 0.0
    dead_letters: int = 0


@dataclass(frozen=True, slots=True)
class StateGauges:
    """A prometheus `Collector` of one snapshot; None when Redis could not be read."""

    snapshot: StateSnapshot | None

    def collect(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(
            "countersign_redis_up",
            "1 if this scrape could read Redis; the gauges read from Redis are missing if not.",
            value=0 if self.snapshot is None else 1,
        )
        snapshot = self.snapshot
        if snapshot is None:
            return
        pending = GaugeMetricFamily(
            "countersign_approvals_pending",
            "Approvals waiting for a person, by tool (read from Redis).",
            labels=["tool"],
        )
        for tool, count in sorted(snapshot.pending_by_tool.items()):
            pending.add_metric([tool], count)
        yield pending
        yield GaugeMetricFamily(
            "countersign_job_stream_length",
            "Jobs in the stream: waiting for a worker or running (read from Redis).",
            value=snapshot.job_stream_length,
        )
        yield GaugeMetricFamily(
            "countersign_job_oldest_age_seconds",
            "Age of the oldest job not yet done; 0 when there is none (read from Redis).",
            value=snapshot.oldest_job_age_seconds,
        )
        yield GaugeMetricFamily(
            "countersign_dead_letters",
            "Jobs in the dead-letter stream: failed too often (read from Redis).",
            value=snapshot.dead_letters,
        )


async def read_state(redis: aioredis.Redis, keys: Keys, *, sample: int = SAMPLE) -> StateSnapshot:
    """Raises RedisError when Redis cannot be read."""
    # TIME on its own: a cluster pipeline refuses a command without a key.
    seconds, micros = await redis.time()
    async with redis.pipeline(transaction=False) as pipe:
        for shard in keys.shards:  # one on a single Redis
            pipe.zcard(shard.deadlines)
            pipe.zrange(shard.deadlines, 0, max(1, sample // keys.shard_count) - 1)
            pipe.xlen(shard.dead_jobs)
            for stream in shard.job_streams:  # a reply's start waits in `jobs_v2`
                pipe.xlen(stream)
                pipe.xrange(stream, count=1)
        replies: list[Any] = await pipe.execute()
    now_ms = seconds * 1000 + micros // 1000
    total = length = dead = 0
    members: list[bytes] = []
    first_ms: list[int] = []
    for k in range(keys.shard_count):
        shard_total, shard_members, shard_dead, *streams = replies[7 * k : 7 * k + 7]
        total, dead = total + int(shard_total), dead + int(shard_dead)
        members.extend(shard_members)
        for shard_length, first in zip(streams[::2], streams[1::2], strict=True):
            length += int(shard_length)
            if first:
                entry_id = first[0][0]
                entry_id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                first_ms.append(int(entry_id.split("-")[0]))
    oldest = max(0.0, (now_ms - min(first_ms)) / 1000) if first_ms else 0.0
    pending = await _pending_by_tool(redis, keys, [m.decode() for m in members])
    pending[UNSAMPLED] = max(0, int(total) - len(members))
    return StateSnapshot(
        pending_by_tool=pending,
        job_stream_length=int(length),
        oldest_job_age_seconds=oldest,
        dead_letters=int(dead),
    )


async def _pending_by_tool(redis: aioredis.Redis, keys: Keys, members: list[str]) -> dict[str, int]:
    """Count the sampled due-set members whose approval is still undecided, by tool."""
    if not members:
        return {}
    async with redis.pipeline(transaction=False) as pipe:
        for member in members:
            run_id, _, approval_id = member.partition(":")
            queue(pipe, keys, PendingRead, run_id, approval_id)
        replies: list[Any] = await pipe.execute()
    counts: Counter[str] = Counter()
    for member, reply in zip(members, replies, strict=True):
        run_id, _, approval_id = member.partition(":")
        view = of_queued(PendingRead, run_id, reply, approval_id)
        if view.tool is None or view.decided:
            continue  # its run ended or moved on, or it is decided and the entry is leaving
        counts[view.tool or UNKNOWN_TOOL] += 1
    return dict(counts)
