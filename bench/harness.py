"""What every benchmark shares: a private Redis (or Redis Cluster), the Procfile's processes,
figures."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from runtime.db.local import RedisServer
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.redis_cluster import LocalCluster

DECISION_EVENTS = {b"approved", b"approved_always", b"rejected", b"expired"}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))
    return ordered[index]


def report(name: str, values: list[float], unit: str = "ms") -> None:
    print(
        f"{name:<40} n={len(values):<6} p50={statistics.median(values):9.2f} {unit}"
        f"  p99={percentile(values, 99):9.2f} {unit}  max={max(values):9.2f} {unit}",
        flush=True,
    )


def machine() -> str:
    memory_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return (
        f"{os.cpu_count()} cores, {memory_kb / 1024 / 1024:.0f} GiB, "
        f"{platform.python_implementation()} {platform.python_version()}"
    )


def header(title: str, command: str) -> None:
    print(f"# {title}\n# machine: {machine()}\n# rerun: {command}", flush=True)


def approve_then_answer(request: ModelRequest) -> list[dict[str, Any]]:
    """An instant model: asks to delete a user, then answers with what the tool said."""
    if not request.tool_outputs:
        return [tool_call("delete_user", {"user_id": "u-100", "reason": request.task}, "c1")]
    return [message("done: " + request.tool_outputs["c1"])]


def answer_at_once(request: ModelRequest) -> list[dict[str, Any]]:
    """An instant model that needs no approval: one model call, one answer."""
    return [message("done")]


def add_cluster_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run against a three-primary Redis Cluster started for it (REDIS_CLUSTER=true)",
    )


@contextlib.asynccontextmanager
async def deployment(
    *, workers: int = 1, prefix: str = "bench:", cluster: bool = False, **worker_env: str
) -> AsyncIterator[Deployment]:
    """A private Redis (`cluster`: a three-primary Redis Cluster), a fake Slack and model
    here, and the Procfile's web and workers."""
    with tempfile.TemporaryDirectory() as directory:
        server: RedisServer | LocalCluster
        if cluster:
            server = LocalCluster(directory=Path(directory) / "cluster")
        else:
            server = RedisServer(directory=Path(directory) / "redis")
        server.start()
        running = Deployment(server.url, prefix, Path(directory), cluster=cluster)
        try:
            await running.start()
            running.model.script = approve_then_answer
            await running.web()
            for number in range(workers):
                running.worker(f"worker.{number + 1}", **worker_env)
            await running.sender.command("warm up")  # pays for auth.test and first imports
            await running.slack.wait_for(lambda: running.slack.cards(), 60, "warm-up card")
            yield running
        finally:
            await running.stop()
            server.stop()


async def decision_to_resume_ms(running: Deployment) -> list[float]:
    """Per run: the decision's Redis time (its script audits it) to the resume claim's."""
    return await decision_to_ms(running, b"resumed")


async def decision_to_ms(running: Deployment, event: bytes, *, first: bool = False) -> list[float]:
    """Per run: the decision's Redis time (its script audits it) to each later `event`'s
    (`first`: to the first one only)."""
    decided: dict[str, float] = {}
    delays: list[float] = []
    for fields in await running.audit_entries():
        details = json.loads(fields[b"details"])
        run_id = fields[b"run_id"].decode()
        if fields[b"event"] in DECISION_EVENTS:
            decided[run_id] = details["at"]  # the last one completes the decision
        elif fields[b"event"] == event and run_id in decided and "at" in details:
            at = decided.pop(run_id) if first else decided[run_id]
            delays.append((details["at"] - at) * 1000)
    return delays


async def poll_until(
    predicate: Callable[[], bool], within: float, what: str, every: float = 0.25
) -> None:
    """Check now and then, not on every change: the fake Slack shares this process with the
    load, and a check that scans thousands of messages on each of thousands of changes would
    be the bottleneck being measured."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(every)


def answered_threads(running: Deployment) -> set[str]:
    """Threads with an answer in them, in one pass (the instant models answer "done…")."""
    return {
        message.thread_ts
        for message in list(running.slack.messages.values())
        if message.thread_ts and not message.blocks and message.text.startswith("done")
    }


def all_answered(running: Deployment, threads: set[str]) -> bool:
    return threads <= answered_threads(running)


async def waiting_cards(running: Deployment, count: int, within: float = 600) -> list[Any]:
    """Start `count` runs and return their approval cards once all are posted."""
    before = len(running.slack.cards())
    for number in range(count):
        status, _ = await running.sender.command(f"delete u-100 (run {number})")
        assert status == 200
    await poll_until(lambda: len(running.slack.cards()) >= before + count, within, "cards")
    return running.slack.cards()[before:]
