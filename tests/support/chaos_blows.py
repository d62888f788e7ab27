"""The chaos test's blows (`tests/faults/test_chaos.py`): workers SIGKILLed (some while a tool
runs) and
replaced, the model failing in bursts, and Redis stopped once while a tool runs; and what the
test reads back through them (the ledger, the `executed` audit entries)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from runtime.db.local import RedisServer
from tests.support.chaos_plans import ChaosModel
from tests.support.deployment import Deployment
from tests.support.processes import Process, wait_for_log

CHAOS_EVERY = (1.5, 4.5)
"""Seconds between two blows (a kill, or a burst of 5xx). Much more often, and on two cores the
replacement workers' start-up starves the rest: jobs run out of deliveries and runs give up."""
OUTAGE_AFTER = 12.0
"""Redis stops once, this long into the chaos, while a tool runs; the runs due to start
meanwhile start once it is back (a stopped Redis cannot start one)."""
OUTAGE_SECONDS = 35.0
"""Longer than the journal's old deadline for recording a tool's output (30 s)."""
WORKER_ENV = {
    "AGENTS": "tests.support.agents:CHAOS_REGISTRY",
    # Kills and 5xx bursts redeliver a job several times; it must not be given up on.
    "JOB_MAX_DELIVERIES": "10",
    "REMINDER_AT": "0",
}


@dataclass(kw_only=True)
class Chaos:
    """Kills workers, starting another in each one's place, and makes the model fail in bursts."""

    deployment: Deployment
    redis: RedisServer
    web: Process
    model: ChaosModel
    rng: random.Random
    workers: dict[str, Process] = field(default_factory=dict)
    deaths: dict[str, float] = field(default_factory=dict)
    """Killed dyno -> when it was dead (its last ledger entry was written before)."""
    bursts: int = 0
    aimed: int = 0
    """Kills aimed at a worker while one of its tools was running."""
    started: int = 0
    outages: int = 0
    began: float = field(default_factory=time.monotonic)
    redis_up: asyncio.Event = field(default_factory=asyncio.Event)
    """Clear while Redis is stopped."""

    def start_worker(self) -> None:
        self.started += 1
        name = f"worker.{self.started}"
        self.workers[name] = self.deployment.worker(name, **WORKER_ENV)

    async def kill(self, dyno: str) -> None:
        process = self.workers.pop(dyno)
        process.signal(signal.SIGKILL)
        await process.wait(timeout=10)
        self.deaths[dyno] = time.time()
        self.start_worker()

    def check_alive(self) -> None:
        for process in [self.web, *self.workers.values()]:
            code = process.popen.poll()
            assert code is None, f"{process.name} exited by itself ({code}):\n{process.log()}"

    async def check_stopping(self) -> None:
        """Every live worker stops on SIGTERM as a deploy stops it, cleanly and in time: one
        whose event loop froze passes `check_alive`, and would never run a job again."""
        for dyno, process in sorted(self.workers.items()):
            # One started in a killed one's place may still be importing: no handler yet.
            await wait_for_log(process, "worker ready", timeout=30)
            process.signal(signal.SIGTERM)
            code = await process.wait(timeout=30)
            assert code == 0, f"{dyno} exited with {code} on SIGTERM:\n{process.log()}"
        self.workers.clear()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.rng.uniform(*CHAOS_EVERY))
                return
            self.check_alive()
            roll = self.rng.random()
            if not self.outages and time.monotonic() - self.began > OUTAGE_AFTER:
                await self.stop_redis_inside_a_tool(stop)
            elif roll < 1 / 3:
                self.model.failures_left = self.rng.randint(4, 6)
                self.bursts += 1
            elif roll < 2 / 3:
                await self.kill(self.rng.choice(sorted(self.workers)))
            else:
                await self.kill_inside_a_tool(stop)

    async def kill_inside_a_tool(self, stop: asyncio.Event) -> None:
        """Wait (a little) for a tool to be running in a live worker, and kill that worker."""
        running = await self.running_tool(stop, 3)
        if running:
            await asyncio.sleep(self.rng.uniform(0, 0.3))
            self.aimed += 1
            await self.kill(running)

    async def stop_redis_inside_a_tool(self, stop: asyncio.Event) -> None:
        """Wait (up to 20 s) for a tool to be running, then stop Redis for `OUTAGE_SECONDS`:
        the tool returns into the outage."""
        await self.running_tool(stop, 20)
        self.outages += 1
        self.redis_up.clear()
        self.redis.stop()
        try:
            await asyncio.sleep(OUTAGE_SECONDS)
        finally:
            self.redis.start()
            await self.deployment.redis.connection_pool.disconnect()  # closed by the stop
            self.redis_up.set()

    async def running_tool(self, stop: asyncio.Event, seconds: float) -> str | None:
        """The dyno of a live worker running a tool, waiting up to `seconds` for one."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not stop.is_set():
            finished = {call_id for call_id, _ in await executed(self.deployment)}
            running = [
                str(entry["dyno"])
                for entry in await ledger(self.deployment)
                if entry["dyno"] in self.workers and entry["call_id"] not in finished
            ]
            if running:
                return self.rng.choice(running)
            await asyncio.sleep(0.05)
        return None

    @property
    def kills(self) -> int:
        return len(self.deaths)


async def answered(deployment: Deployment, read: Any) -> Any:
    """`read()`'s answer from the test's Redis client, waiting out the outage."""
    deadline = time.monotonic() + OUTAGE_SECONDS + 30
    while True:
        try:
            return await read()
        except RedisError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
            await deployment.redis.connection_pool.disconnect()


async def ledger(deployment: Deployment) -> list[dict[str, Any]]:
    entries: Any = await answered(
        deployment, lambda: deployment.redis.lrange(deployment.ledger_key, 0, -1)
    )
    return [json.loads(entry) for entry in entries]


async def executed(deployment: Deployment) -> list[tuple[str, float]]:
    """(call id, when) of every `executed` audit entry: the call's output was journaled."""
    rows: Any = await answered(deployment, lambda: deployment.redis.xrange(deployment.keys.audit))
    found = []
    for _, fields in rows:
        if fields[b"event"] == b"executed":
            details = json.loads(fields[b"details"])
            found.append((details["call_id"], details["at"]))
    return found
