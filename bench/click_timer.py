"""Slack's side of a benchmark's clicks, in a process of its own: sends signed requests on a
schedule and times each acknowledgement.

    python -m bench.click_timer   # reads a `Plan` (JSON) on stdin, prints "ready", waits for
                                  # "go", then prints the `Timings` (JSON)

A benchmark's own process also serves the fake Slack API: answering 200 `views.publish` calls
and checking each view as Slack would keeps its event loop busy for tens of milliseconds at a
time, and a click timed there would wait behind that work, not behind the web process's
(measured: the harness's loop fell 10 to 27 ms behind during a fan-out's first publishes).
Real Slack times a click on machines of its own; so does this.
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp
from pydantic import BaseModel

from bot.console.slack_payloads import signature_headers


class Click(BaseModel):
    after_seconds: float
    """From "go"."""
    url: str
    body: str
    """The form Slack posts (`payload=...`), signed when it is sent."""


class Plan(BaseModel):
    secret: str
    clicks: list[Click]


class Timings(BaseModel):
    statuses: list[int]
    ack_ms: list[float]
    """Per click, in the plan's order."""


async def send(plan: Plan, started: float, session: aiohttp.ClientSession) -> Timings:
    statuses = [0] * len(plan.clicks)
    ack_ms = [0.0] * len(plan.clicks)

    async def one(index: int, click: Click) -> None:
        await asyncio.sleep(max(0.0, started + click.after_seconds - time.perf_counter()))
        headers = signature_headers(plan.secret, click.body)
        sent = time.perf_counter()
        async with session.post(click.url, data=click.body.encode(), headers=headers) as response:
            await response.read()
            statuses[index] = response.status
        ack_ms[index] = (time.perf_counter() - sent) * 1000

    async with asyncio.TaskGroup() as group:
        for index, click in enumerate(plan.clicks):
            group.create_task(one(index, click))
    return Timings(statuses=statuses, ack_ms=ack_ms)


async def main() -> None:
    plan = Plan.model_validate_json(sys.stdin.readline())
    async with aiohttp.ClientSession() as session:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        timings = await send(plan, time.perf_counter(), session)
    print(timings.model_dump_json(), flush=True)


class ClickTimer:
    """The benchmark's handle on the timer: `start` it (ready to send), then `go`."""

    def __init__(self, plan: Plan) -> None:
        self._plan = plan
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.click_timer",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(self._plan.model_dump_json().encode() + b"\n")
        await self._process.stdin.drain()
        line = await self._process.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"the click timer did not start: {line!r}")

    async def go(self) -> Timings:
        """Send the clicks now; their timings once all are acknowledged."""
        assert self._process is not None
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(b"go\n")
        await self._process.stdin.drain()
        line = await self._process.stdout.readline()
        await self._process.wait()
        return Timings.model_validate_json(line)


if __name__ == "__main__":
    asyncio.run(main())
