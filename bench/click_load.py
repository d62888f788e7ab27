"""Click -> HTTP acknowledgement under load: 50, 200 and 500 clicks per second.

    .venv/bin/python -m bench.click_load [--seconds 5] [--rates 50,200,500]

Real `web` and `worker` processes, a private Redis, a fake Slack and an instant model. First it
opens one waiting approval per click to come; then, for each rate, it sends signed Approve
clicks on distinct cards on a fixed schedule (open loop: a slow answer does not slow the
sender down), so every click is a real decision that also resumes a run on the worker.
Slack wants the acknowledgement within 3 s; the target here is p99 <= 25 ms at 200/s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from functools import partial
from typing import Any

from bench.harness import (
    all_answered,
    decision_to_resume_ms,
    deployment,
    header,
    poll_until,
    report,
    waiting_cards,
)
from tests.deployment import Deployment


async def click_at_rate(running: Deployment, cards: list[Any], rate: int) -> list[float]:
    # The load generator holds tens of thousands of fake-Slack objects; its own garbage
    # collector would pause it mid-measurement and count the pause against the web process.
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        return await _click_at_rate(running, cards, rate)
    finally:
        gc.enable()
        gc.unfreeze()


async def _click_at_rate(running: Deployment, cards: list[Any], rate: int) -> list[float]:
    latencies: list[float] = []
    start = time.perf_counter() + 0.1

    async def click(number: int, card: Any) -> None:
        await asyncio.sleep(max(0.0, start + number / rate - time.perf_counter()))
        sent = time.perf_counter()
        status, _ = await running.sender.click(card, "approve", user=f"U{number:06d}")
        latencies.append((time.perf_counter() - sent) * 1000)
        assert status == 200, status

    async with asyncio.TaskGroup() as group:
        for number, card in enumerate(cards):
            group.create_task(click(number, card))
    elapsed = time.perf_counter() - start
    print(f"  sent {len(cards)} clicks in {elapsed:.2f} s ({len(cards) / elapsed:.0f}/s)")
    return latencies


async def measure(seconds: float, rates: list[int]) -> None:
    async with deployment() as running:
        total = sum(int(rate * seconds) for rate in rates)
        started = time.perf_counter()
        cards = await waiting_cards(running, total)
        print(f"{total} waiting approvals opened in {time.perf_counter() - started:.1f} s")
        for rate in rates:
            batch, cards = cards[: int(rate * seconds)], cards[int(rate * seconds) :]
            await running.redis.delete(running.keys.audit)  # this rate's resumes only
            latencies = await click_at_rate(running, batch, rate)
            report(f"click -> ack at {rate}/s", latencies)
            threads = {str(card.thread_ts) for card in batch}
            await poll_until(partial(all_answered, running, threads), 900, "answers")
            report(f"decision -> resume start at {rate}/s", await decision_to_resume_ms(running))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="50,200,500")
    args = parser.parse_args()
    rates = [int(rate) for rate in args.rates.split(",")]
    header(
        "click acknowledgement under load",
        f".venv/bin/python -m bench.click_load --seconds {args.seconds} --rates {args.rates}",
    )
    asyncio.run(measure(args.seconds, rates))


if __name__ == "__main__":
    main()
