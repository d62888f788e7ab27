"""What `REDIS_MIN_REPLICAS=1` costs a click: click -> acknowledgement with and without `WAIT`.

    .venv/bin/python -m bench.wait_cost [--clicks 200] [--rate 50]

A local primary and its replica (`tests.support.replicated_redis`, the link not held), the
Procfile's
`web` and a worker, a fake Slack and an instant model. For `REDIS_MIN_REPLICAS` 0 and then 1 it
opens one waiting approval per click, then sends the Approve clicks one at a time (each waits
for the last: the cost of one click, no queueing) and then at `--rate` per second (open loop).
It also counts the commands the primary ran per click (`INFO commandstats`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bench.click_load import click_at_rate
from bench.harness import all_answered, approve_then_answer, header, poll_until, report
from bench.harness import waiting_cards as open_cards
from runtime.db.keys import Keys
from runtime.db.replication import Replication
from tests.support.deployment import Deployment
from tests.support.replicated_redis import ReplicatedRedis


@contextlib.asynccontextmanager
async def deployment(
    servers: ReplicatedRedis, directory: Path, min_replicas: int
) -> AsyncIterator[Deployment]:
    running = Deployment(servers.primary_url, f"bench-wait{min_replicas}:", directory)
    env = {"REDIS_MIN_REPLICAS": str(min_replicas), "REDIS_WAIT_MS": "500"}
    try:
        await running.start()
        running.model.script = approve_then_answer
        await running.web(**env)
        running.worker("worker.1", **env)
        await running.sender.command("warm up")
        await running.slack.wait_for(lambda: running.slack.cards(), 60, "warm-up card")
        yield running
    finally:
        await running.stop()


async def commands(primary: aioredis.Redis) -> dict[str, int]:
    stats: Any = await primary.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


async def one_at_a_time(running: Deployment, cards: list[Any]) -> list[float]:
    latencies = []
    for number, card in enumerate(cards):
        sent = time.perf_counter()
        status, _ = await running.sender.click(card, "approve", user=f"U{number:06d}")
        latencies.append((time.perf_counter() - sent) * 1000)
        assert status == 200, status
    return latencies


async def confirm_alone(primary: aioredis.Redis, rounds: int = 2000) -> None:
    """What `confirm()` adds, without the processes around it: its round trip vs a PING's."""
    replication = Replication.of(primary, Keys("bench-wait:"), min_replicas=1, wait_ms=500)
    for name, call in (("PING round trip", primary.ping), ("confirm() (PUBLISH+WAIT 1)", None)):
        latencies = []
        for _ in range(rounds):
            started = time.perf_counter()
            await (call() if call is not None else replication.confirm())
            latencies.append((time.perf_counter() - started) * 1000)
        report(name, latencies)


async def measure(clicks: int, rate: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        servers = ReplicatedRedis(Path(folder) / "redis")
        await servers.start(sentinels=False)
        primary = aioredis.Redis.from_url(servers.primary_url)
        try:
            await confirm_alone(primary)
            for min_replicas in (0, 1):
                directory = Path(folder) / f"n{min_replicas}"
                directory.mkdir()
                async with deployment(servers, directory, min_replicas) as running:
                    cards = await open_cards(running, 2 * clicks)
                    serial, paced = cards[:clicks], cards[clicks:]
                    before = await commands(primary)
                    latencies = await one_at_a_time(running, serial)
                    after = await commands(primary)
                    report(f"N={min_replicas} click -> ack, one at a time", latencies)
                    waits = after.get("wait", 0) - before.get("wait", 0)
                    total = sum(after.values()) - sum(before.values())
                    print(
                        f"  primary ran {total / clicks:.1f} commands per click while clicking "
                        f"(WAIT: {waits / clicks:.2f} per click; worker traffic included)"
                    )
                    report(
                        f"N={min_replicas} click -> ack at {rate}/s",
                        await click_at_rate(running.sender, paced, rate),
                    )
                    threads = {str(card.thread_ts) for card in cards}
                    await poll_until(partial(all_answered, running, threads), 300, "answers")
        finally:
            await primary.aclose()
            await servers.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clicks", type=int, default=200)
    parser.add_argument("--rate", type=int, default=50)
    args = parser.parse_args()
    header(
        "the cost of WAIT on a click (local primary + replica)",
        f".venv/bin/python -m bench.wait_cost --clicks {args.clicks} --rate {args.rate}",
    )
    asyncio.run(measure(args.clicks, args.rate))


if __name__ == "__main__":
    main()
