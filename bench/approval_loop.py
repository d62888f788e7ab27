"""Latency of the approval loop, measured on real processes.

    .venv/bin/python -m bench.approval_loop [--runs 300]

Starts a private Redis, a fake Slack and an instant fake model in this process, and the
Procfile's `web` and `worker` as real processes. Then, for `--runs` runs:
- slash command: signed POST -> HTTP acknowledgement (Slack allows 3 s);
- click: signed Approve POST -> HTTP acknowledgement (the decision is in Redis by then);
- decision -> resume start: the decision's Redis time (audited in its Lua script) to the resume
  claim's Redis time (audited in the claim script), same clock;
- stored bytes per pending run: MEMORY USAGE of the run's hash plus its deadline entry.
Prints medians and p99s. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import zlib
from functools import partial
from pathlib import Path
from typing import Any

from runtime.local_redis import RedisServer
from tests.deployment import Deployment
from tests.fake_openai import ModelRequest, message, tool_call

DECISION_EVENTS = {b"approved", b"approved_always", b"rejected", b"expired"}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))
    return ordered[index]


def report(name: str, values: list[float], unit: str = "ms") -> None:
    print(
        f"{name:<34} n={len(values):<5} p50={statistics.median(values):8.2f} {unit}"
        f"   p99={percentile(values, 99):8.2f} {unit}   max={max(values):8.2f} {unit}"
    )


def instant_model(request: ModelRequest) -> list[dict[str, Any]]:
    if not request.tool_outputs:
        return [tool_call("delete_user", {"user_id": "u-100", "reason": request.task}, "c1")]
    return [message("done: " + request.tool_outputs["c1"])]


async def measure(runs: int, logs: Path) -> None:
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(directory=Path(directory))
        server.start()
        deployment = Deployment(server.url, "bench:", logs)
        try:
            await deployment.start()
            deployment.model.script = instant_model
            await deployment.web()
            deployment.worker("worker.1")
            await run_bench(deployment, runs)
        finally:
            await deployment.stop()
            server.stop()


async def run_bench(deployment: Deployment, runs: int) -> None:
    slack, sender = deployment.slack, deployment.sender
    await sender.command("warm up")  # first request pays for auth.test and imports
    await slack.wait_for(lambda: slack.cards(), 30, "warm-up card")

    command_ms: list[float] = []
    for n in range(runs):
        started = time.perf_counter()
        status, _ = await sender.command(f"delete u-100 (run {n})")
        command_ms.append((time.perf_counter() - started) * 1000)
        assert status == 200
    await slack.wait_for(lambda: len(slack.cards()) >= runs + 1, 120, "all cards")
    cards = slack.cards()[1:]

    stored = await stored_bytes(deployment)

    # One click at a time, each run finished before the next click: latency, not backlog.
    click_ms: list[float] = []
    for card in cards:
        started = time.perf_counter()
        status, _ = await sender.click(card, "approve", user="UBOB")
        click_ms.append((time.perf_counter() - started) * 1000)
        assert status == 200 and card.thread_ts is not None
        await slack.wait_for(partial(slack.final_answers, card.thread_ts), 30, "answer")
    resume_ms = await decision_to_resume(deployment)

    version = await redis_version(deployment)
    print(f"\nruns: {runs}, one web and one worker process, Redis {version}")
    report("slash command -> ack", command_ms)
    report("click Approve -> ack", click_ms)
    report("decision recorded -> resume start", resume_ms)
    print(
        f"{'stored per pending run':<34} {stored['memory']:,} bytes in Redis "
        f"(RunState JSON {stored['raw']:,} bytes raw, {stored['compressed']:,} zlib)"
    )


async def stored_bytes(deployment: Deployment) -> dict[str, int]:
    redis = deployment.redis
    keys = [key async for key in redis.scan_iter(match="bench:run:*")]
    sizes = [int(await redis.memory_usage(key, samples=0) or 0) for key in keys]
    states = [await redis.hget(key, "state") for key in keys]
    deadlines = int(await redis.memory_usage("bench:deadlines", samples=0) or 0)
    raw = [len(zlib.decompress(s)) for s in states if isinstance(s, bytes)]
    return {
        "memory": int(statistics.median(sizes) + deadlines / max(1, len(keys))),
        "raw": int(statistics.median(raw)),
        "compressed": int(statistics.median(len(s) for s in states if isinstance(s, bytes))),
    }


async def decision_to_resume(deployment: Deployment) -> list[float]:
    rows: Any = await deployment.redis.xrange("bench:audit")
    decided: dict[str, float] = {}
    delays: list[float] = []
    for _id, fields in rows:
        details = json.loads(fields[b"details"])
        run_id = fields[b"run_id"].decode()
        if fields[b"event"] in DECISION_EVENTS:
            decided[run_id] = details["at"]  # the last one completes the decision
        elif fields[b"event"] == b"resumed" and run_id in decided:
            delays.append((details["at"] - decided[run_id]) * 1000)
    return delays


async def redis_version(deployment: Deployment) -> str:
    info: Any = await deployment.redis.info("server")
    return str(info["redis_version"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as logs:
        asyncio.run(measure(args.runs, Path(logs)))


if __name__ == "__main__":
    main()
