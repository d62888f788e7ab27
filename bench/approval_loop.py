"""Latency of the approval loop, measured on real processes, one request at a time.

    .venv/bin/python -m bench.approval_loop [--runs 300] [--cluster]

A private Redis (`--cluster`: a three-primary Redis Cluster), a fake Slack and an instant fake
model in this process; the Procfile's `web` and `worker` as real processes. For `--runs` runs:
- slash command: signed POST -> HTTP acknowledgement (Slack allows 3 s);
- click: signed Approve POST -> HTTP acknowledgement (the decision is in Redis by then);
- decision -> resume start: Redis time of the decision to Redis time of the resume claim,
  each click waiting for the previous run's answer (latency, not backlog);
- stored bytes per pending run: MEMORY USAGE of the run's hash plus its deadline entry.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import zlib
from functools import partial
from typing import Any

from bench.harness import add_cluster_option, decision_to_resume_ms, deployment, header, report
from tests.support.deployment import Deployment
from tests.support.harness import keys_under


async def measure(runs: int, cluster: bool) -> None:
    async with deployment(cluster=cluster) as running:
        slack, sender = running.slack, running.sender
        command_ms: list[float] = []
        before = len(slack.cards())
        for n in range(runs):
            started = time.perf_counter()
            status, _ = await sender.command(f"delete u-100 (run {n})")
            command_ms.append((time.perf_counter() - started) * 1000)
            assert status == 200
        await slack.wait_for(lambda: len(slack.cards()) >= before + runs, 120, "all cards")
        cards = slack.cards()[before:]
        stored = await stored_bytes(running)

        click_ms: list[float] = []
        for card in cards:
            started = time.perf_counter()
            status, _ = await sender.click(card, "approve", user="UBOB")
            click_ms.append((time.perf_counter() - started) * 1000)
            assert status == 200 and card.thread_ts is not None
            await slack.wait_for(partial(slack.final_answers, card.thread_ts), 30, "answer")
        report("slash command -> ack", command_ms)
        report("click Approve -> ack", click_ms)
        report("decision recorded -> resume start", await decision_to_resume_ms(running))
        print(
            f"{'stored per pending run':<40} {stored['memory']:,} bytes in Redis "
            f"(RunState JSON {stored['raw']:,} bytes raw, {stored['compressed']:,} zlib)"
        )


async def stored_bytes(running: Deployment) -> dict[str, int]:
    redis = running.redis
    keys = [key for key in await keys_under(redis, running.prefix) if ":run:" in f":{key}"]
    sizes = [int(await redis.memory_usage(key, samples=0) or 0) for key in keys]
    states: list[Any] = [await redis.hget(key, "state") for key in keys]
    deadlines = 0
    for shard in running.keys.shards:
        deadlines += int(await redis.memory_usage(shard.deadlines, samples=0) or 0)
    return {
        "memory": int(statistics.median(sizes) + deadlines / max(1, len(keys))),
        "raw": int(statistics.median(len(zlib.decompress(s)) for s in states)),
        "compressed": int(statistics.median(len(s) for s in states)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    add_cluster_option(parser)
    args = parser.parse_args()
    where = " --cluster" if args.cluster else ""
    header(
        "approval loop latency" + (" (Redis Cluster)" if args.cluster else ""),
        f".venv/bin/python -m bench.approval_loop --runs {args.runs}{where}",
    )
    asyncio.run(measure(args.runs, args.cluster))


if __name__ == "__main__":
    main()
