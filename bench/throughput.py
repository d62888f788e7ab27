"""Worker throughput: runs per second with an instant model, one and two worker processes.

    .venv/bin/python -m bench.throughput [--runs 600] [--cluster]

Each run is a slash command -> root message -> one model call -> answer in the thread (the
fixed cost of a run: job, Redis record, three Slack posts, the SDK's turn). Commands are sent
as fast as the web process acknowledges them; the figure is runs finished per second between
the first command and the last answer. Also: one approval round trip per run (start, card,
click, resume, answer) with one worker.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.harness import (
    add_cluster_option,
    answer_at_once,
    answered_threads,
    deployment,
    header,
    poll_until,
    waiting_cards,
)
from tests.support.deployment import Deployment


async def answered_runs(running: Deployment, runs: int) -> float:
    before = len(running.slack.roots())
    started = time.perf_counter()
    for number in range(runs):
        status, _ = await running.sender.command(f"say hello ({number})")
        assert status == 200

    def finished() -> bool:
        roots = {r.ts for r in running.slack.roots()[before:]}
        return len(roots) == runs and roots <= answered_threads(running)

    await poll_until(finished, 600, "all answers", every=0.05)
    return runs / (time.perf_counter() - started)


async def approval_round_trips(running: Deployment, runs: int) -> float:
    started = time.perf_counter()
    cards = await waiting_cards(running, runs)
    for card in cards:
        status, _ = await running.sender.click(card, "approve", user="UBOB")
        assert status == 200

    threads = {str(card.thread_ts) for card in cards}
    await poll_until(lambda: threads <= answered_threads(running), 600, "answers", every=0.05)
    return runs / (time.perf_counter() - started)


async def measure(runs: int, cluster: bool) -> None:
    for workers in (1, 2):
        async with deployment(workers=workers, cluster=cluster) as running:
            running.model.script = answer_at_once
            rate = await answered_runs(running, runs)
            print(f"{workers} worker(s): {rate:6.1f} runs/s without approvals", flush=True)
    async with deployment(workers=1, cluster=cluster) as running:
        rate = await approval_round_trips(running, runs // 2)
        print(f"1 worker:    {rate:6.1f} runs/s with one approval each", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=600)
    add_cluster_option(parser)
    args = parser.parse_args()
    where = " --cluster" if args.cluster else ""
    header(
        "worker throughput" + (" (Redis Cluster)" if args.cluster else ""),
        f".venv/bin/python -m bench.throughput --runs {args.runs}{where}",
    )
    asyncio.run(measure(args.runs, args.cluster))


if __name__ == "__main__":
    main()
