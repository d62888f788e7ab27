"""Click -> HTTP acknowledgement under load: 50, 200 and 500 clicks per second.

    .venv/bin/python -m bench.click_load [--seconds 5] [--rates 50,200,500]
    .venv/bin/python -m bench.click_load --chart   # sweeps 25..400/s, draws bench/click_load.png

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

from bench.charts import Series, conditions, line_chart, load_average
from bench.harness import (
    all_answered,
    decision_to_resume_ms,
    deployment,
    header,
    percentile,
    poll_until,
    report,
    waiting_cards,
)
from tests.support.slack_requests import SlackSender

SLACK_ACK_MS = 3000.0
"""Slack shows the person an error when the acknowledgement takes longer."""
CHART_RATES = "25,50,100,200,400"
"""The sweep `--chart` draws when no `--rates` are given."""


async def click_at_rate(sender: SlackSender, cards: list[Any], rate: int) -> list[float]:
    # The load generator holds tens of thousands of fake-Slack objects; its own garbage
    # collector would pause it mid-measurement and count the pause against the web process.
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        return await _click_at_rate(sender, cards, rate)
    finally:
        gc.enable()
        gc.unfreeze()


async def _click_at_rate(sender: SlackSender, cards: list[Any], rate: int) -> list[float]:
    latencies: list[float] = []
    start = time.perf_counter() + 0.1

    async def click(number: int, card: Any) -> None:
        await asyncio.sleep(max(0.0, start + number / rate - time.perf_counter()))
        sent = time.perf_counter()
        status, _ = await sender.click(card, "approve", user=f"U{number:06d}")
        latencies.append((time.perf_counter() - sent) * 1000)
        assert status == 200, status

    async with asyncio.TaskGroup() as group:
        for number, card in enumerate(cards):
            group.create_task(click(number, card))
    elapsed = time.perf_counter() - start
    load = load_average()
    print(
        f"  sent {len(cards)} clicks in {elapsed:.2f} s ({len(cards) / elapsed:.0f}/s), "
        f"load average {load}"
    )
    return latencies


async def measure(seconds: float, rates: list[int]) -> dict[int, list[float]]:
    """Click -> ack latencies (ms) by rate."""
    found: dict[int, list[float]] = {}
    async with deployment() as running:
        total = sum(int(rate * seconds) for rate in rates)
        started = time.perf_counter()
        cards = await waiting_cards(running, total)
        print(f"{total} waiting approvals opened in {time.perf_counter() - started:.1f} s")
        for rate in rates:
            batch, cards = cards[: int(rate * seconds)], cards[int(rate * seconds) :]
            await running.redis.delete(running.keys.audit)  # this rate's resumes only
            latencies = await click_at_rate(running.sender, batch, rate)
            found[rate] = latencies
            report(f"click -> ack at {rate}/s", latencies)
            threads = {str(card.thread_ts) for card in batch}
            await poll_until(partial(all_answered, running, threads), 900, "answers")
            report(f"decision -> resume start at {rate}/s", await decision_to_resume_ms(running))
    return found


def draw(found: dict[int, list[float]], path: str, title: str) -> None:
    ack_chart(
        path,
        title,
        {
            f"p{pct}": [(rate, percentile(values, pct)) for rate, values in found.items()]
            for pct in (50, 90, 99)
        },
    )


def ack_chart(path: str, title: str, series: Series) -> None:
    """Click -> ack by click rate, against Slack's 3 s: also the round-robin bench's chart."""
    line_chart(
        path,
        title,
        "clicks per second (open loop)",
        "click -> HTTP ack, ms",
        series,
        logx=True,
        logy=True,
        note=conditions(),
        limits={"Slack's limit (3 s)": SLACK_ACK_MS},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--rates", default=None, help=f"default 50,200,500 ({CHART_RATES} with --chart)"
    )
    parser.add_argument("--chart", action="store_true", help="draw bench/click_load.png")
    args = parser.parse_args()
    chosen = args.rates or (CHART_RATES if args.chart else "50,200,500")
    rates = [int(rate) for rate in chosen.split(",")]
    header(
        "click acknowledgement under load",
        f".venv/bin/python -m bench.click_load --seconds {args.seconds} --rates {chosen}"
        + (" --chart" if args.chart else ""),
    )
    found = asyncio.run(measure(args.seconds, rates))
    if args.chart:
        draw(found, "click_load.png", "Click -> ack against the click rate (one web, one worker)")


if __name__ == "__main__":
    main()
