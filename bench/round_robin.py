"""Two web processes behind a round-robin proxy: clicks on either land; click -> ack, one vs two.

    .venv/bin/python -m bench.round_robin [--seconds 4] [--rates 50,100,200] [--chart]

Real `web` processes (two, on ports of their own), one `worker`, a private Redis, a fake Slack and
an instant model. Slack's requests go to a small round-robin HTTP proxy (aiohttp, here in the
bench, like a platform's router): first with one web behind it, then with both. For each rate
it sends signed Approve clicks on distinct waiting cards on a fixed schedule (open loop), and
reports click -> HTTP ack; then it checks that every click either landed (its run decided and
answered) or was answered "try again" with nothing recorded (an overloaded web's Redis calls
time out), and how many clicks each web took. Both setups go through the same proxy, so its
own hop (a few ms in this process) is in both figures alike.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from bench.charts import load_average
from bench.click_load import ack_chart, click_at_rate
from bench.harness import (
    answered_threads,
    deployment,
    header,
    percentile,
    poll_until,
    waiting_cards,
)
from bot.words import runs as messages
from runtime.db.local import free_port
from tests.support.deployment import Deployment
from tests.support.harness import SIGNING_SECRET
from tests.support.local_server import serve
from tests.support.processes import Process, procfile, wait_until_healthy
from tests.support.slack_requests import SlackSender

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "host",
}
"""Headers that describe one connection, not the request: each hop sets its own."""


class RoundRobinProxy:
    """Forwards each request to the next backend in turn, keeping connections to them open."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = backends
        """Base URLs (`http://127.0.0.1:PORT`); change it between loads to add or drop one."""
        self.forwarded: Counter[str] = Counter()
        """Requests answered, by backend."""
        self.url = ""
        self._turn = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=30),
            auto_decompress=False,
        )
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._forward)
        self._runner, self.url = await serve(app)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        backend = self.backends[self._turn % len(self.backends)]
        self._turn += 1
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self._session.request(
            request.method, backend + request.path_qs, headers=headers, data=await request.read()
        ) as answer:
            body = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
        self.forwarded[backend] += 1
        return web.Response(status=answer.status, body=body, headers=kept)


async def second_web(running: Deployment) -> tuple[Process, str]:
    """Another `web` process from the Procfile, on a port of its own, same Redis and Slack."""
    port = free_port()
    process = Process("web.2", procfile()["web"], running.env(PORT=str(port)), running.logs)
    running.processes.append(process)  # stopped with the deployment
    await wait_until_healthy(f"http://127.0.0.1:{port}/healthz", process)
    return process, f"http://127.0.0.1:{port}"


async def measure(seconds: float, rates: list[int]) -> dict[str, dict[int, list[float]]]:
    """Click -> ack latencies (ms) by setup ("one web", "two webs") and rate."""
    found: dict[str, dict[int, list[float]]] = {}
    # 32 runs at once open the waiting cards faster; 30 s is the product's idle timeout; an
    # hour's approvals neither expire nor remind (thousands of reminders) before their click.
    async with deployment(
        WORKER_CONCURRENCY="32", JOB_IDLE_TIMEOUT_SECONDS="30", APPROVAL_TTL_SECONDS="3600"
    ) as running:
        _, other = await second_web(running)
        first = f"http://127.0.0.1:{running.port}"
        proxy = RoundRobinProxy([first])
        await proxy.start()
        # No cap on connections (aiohttp's default is 100): a sender that waits for a free
        # connection while acks are slow would stop sending at the rate it was given.
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        try:
            sender = SlackSender(
                session, f"{proxy.url}/slack/events", SIGNING_SECRET, running.slack
            )
            per_setup = sum(int(rate * seconds) for rate in rates)
            started = time.perf_counter()
            cards = await waiting_cards(running, 2 * per_setup)
            print(f"{len(cards)} waiting approvals opened in {time.perf_counter() - started:.1f} s")
            for setup, backends in (("one web", [first]), ("two webs", [first, other])):
                proxy.backends = backends
                found[setup] = {}
                for rate in rates:
                    batch, cards = cards[: int(rate * seconds)], cards[int(rate * seconds) :]
                    clicks = await clicks_land(running, proxy, sender, batch, rate)
                    found[setup][rate] = clicks.latencies
                    print(summary(setup, rate, clicks, proxy, backends), flush=True)
        finally:
            await session.close()
            await proxy.stop()
    return found


@dataclass(frozen=True)
class Clicks:
    latencies: list[float]
    """Click -> HTTP ack, ms."""
    landed: int
    """Decided, resumed and answered."""
    try_again: int
    """Acknowledged, then told "try again" (the web's Redis calls timed out under overload):
    nothing recorded, the buttons stay. The promise's answer to overload, not a loss."""


async def clicks_land(
    running: Deployment, proxy: RoundRobinProxy, sender: SlackSender, batch: list[Any], rate: int
) -> Clicks:
    """Click every card at `rate`; then wait until each click either landed (the run was
    decided and answered) or its clicker was told to try again, and check that no told click
    was recorded."""
    proxy.forwarded.clear()
    told_before = len(running.slack.ephemerals)
    latencies = await click_at_rate(sender, batch, rate)
    threads = {f"U{number:06d}": str(card.thread_ts) for number, card in enumerate(batch)}

    def told() -> set[str]:
        notes = running.slack.ephemerals[told_before:]
        return {note["user"] for note in notes if note.get("text") == messages.TRY_AGAIN}

    def settled() -> bool:
        waiting = {threads[user] for user in threads.keys() - told()}
        return waiting <= answered_threads(running)

    await poll_until(settled, 300, "answers or try-again notes")
    retry = told()
    answered = answered_threads(running)
    assert not {threads[user] for user in retry} & answered, "a try-again click was recorded"
    return Clicks(latencies, len(threads) - len(retry), len(retry))


def summary(
    setup: str, rate: int, clicks: Clicks, proxy: RoundRobinProxy, backends: list[str]
) -> str:
    latencies = clicks.latencies
    shares = ", ".join(f"{proxy.forwarded[b]} via :{b.rsplit(':', 1)[1]}" for b in backends)
    assert all(proxy.forwarded[b] > 0 for b in backends), "a web behind the proxy took no click"
    return (
        f"{setup:<8} {rate:>4}/s  click -> ack p50 {percentile(latencies, 50):7.1f} ms  "
        f"p99 {percentile(latencies, 99):7.1f} ms  max {max(latencies):7.1f} ms  "
        f"({len(latencies)} clicks: {clicks.landed} decided and answered, "
        f"{clicks.try_again} told to try again; {shares}; "
        f"load average {load_average()})"
    )


def draw(found: dict[str, dict[int, list[float]]]) -> None:
    series = {
        f"{setup} p{pct}": [(rate, percentile(values, pct)) for rate, values in by_rate.items()]
        for setup, by_rate in found.items()
        for pct in (50, 99)
    }
    ack_chart("round_robin.png", "Click -> ack behind a round-robin proxy: one web or two", series)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rates", default="50,100,200")
    parser.add_argument("--chart", action="store_true", help="draw bench/round_robin.png")
    args = parser.parse_args()
    rates = [int(rate) for rate in args.rates.split(",")]
    header(
        "two web processes behind a round-robin proxy",
        f".venv/bin/python -m bench.round_robin --seconds {args.seconds:g} --rates {args.rates}"
        + (" --chart" if args.chart else ""),
    )
    found = asyncio.run(measure(args.seconds, rates))
    if args.chart:
        draw(found)


if __name__ == "__main__":
    main()
