"""The trail's reviews at scale: the backtest and the stats over 100,000 audit entries, and what
keeping a call's arguments adds to each entry in Redis.

    .venv/bin/python -m bench.audit_review [--entries 100000]

Fills a private Redis with `--entries` audit entries as the scripts write them: runs starting
about once a second, each asking once (approved, rejected, expired, a grant's use or
auto-approved), decisions from 2 s to 10 minutes after the card, so a few hundred calls are
open at any point of the trail. Then times `python -m runtime policy backtest`'s replay and
`python -m runtime stats`'s count over it (median of 3), and their peak Python memory
(tracemalloc) against the size of the trail: they stream, holding only the open calls.
Last, the Redis memory of 10,000 `requested` entries with and without their arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import json
import random
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bench.harness import header
from runtime.audit.trail import AuditTrail
from runtime.calls.digest import call_digest
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.policy import load_policy
from runtime.review.backtest import backtest
from runtime.review.stats import decision_stats
from runtime.settings import RuntimeSettings

PROPOSAL = """
[[rule]]
tool = "delete_*"
auto = "reject"

[[rule]]
tool = "restart_*"
approvers = ["S0SRE"]
quorum = 2
"""
TOOLS = ("delete_user", "restart_service", "refund_order", "drop_table")
PEOPLE = ("UBOB", "UCAROL", "UDAVE", "UERIN")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def arguments(rng: random.Random, tool: str) -> str:
    """About 80 bytes of JSON, as a typical call's."""
    return json.dumps(
        {"target": f"{tool.split('_')[1]}-{rng.randrange(10_000)}", "reason": "ticket OPS-1234"}
    )


def trail_of(count: int, seed: int = 21) -> list[tuple[float, dict[str, str]]]:
    """`count` entries (`at`, stream fields), in the order of their times."""
    rng = random.Random(seed)
    entries: list[tuple[float, dict[str, str]]] = []
    start = time.time() - 7 * 86400
    run = 0
    while len(entries) < count:
        run += 1
        run_id, at = f"r{run:016x}", start + run * rng.uniform(0.5, 1.5)
        tool, person = rng.choice(TOOLS), rng.choice(PEOPLE)
        args = arguments(rng, tool)
        call = {
            "approval_id": f"a{run:010d}",
            "call_id": f"call_{run}",
            "tool": tool,
            "agent": "ops",
            "requester": "UALICE",
            "channel": rng.choice(("CGENERAL", "COPS", "CBILLING")),
            "digest": call_digest(tool, args),
            "quorum": 1,
            "arguments": args,
        }
        entries.append((at, fields("started", run_id, at, channel=call["channel"])))
        fate = rng.choices(
            ("approved", "rejected", "expired", "grant_used", "auto_approved"),
            weights=(60, 15, 5, 10, 10),
        )[0]
        if fate in ("grant_used", "auto_approved"):
            entries.append((at + 0.01, fields(fate, run_id, at + 0.01, **call, user_id=person)))
            done = at + 0.5
        else:
            asked = at + 0.01
            entries.append((asked, fields("requested", run_id, asked, **call, approvers="")))
            decided = asked + (3600.0 if fate == "expired" else rng.lognormvariate(3.5, 1.2))
            who = {} if fate == "expired" else {"user_id": person, "approvals": 1}
            decision = {k: v for k, v in call.items() if k != "arguments"}
            entries.append((decided, fields(fate, run_id, decided, **decision, **who)))
            done = decided + 0.5
        entries.append((done, fields("finished", run_id, done)))
    entries.sort(key=lambda entry: entry[0])
    return entries[:count]


def fields(event: str, run_id: str, at: float, **details: Any) -> dict[str, str]:
    return {"event": event, "run_id": run_id, "details": json.dumps({**details, "at": at})}


async def fill(redis: aioredis.Redis, stream: str, entries: list[tuple[float, Any]]) -> None:
    for begin in range(0, len(entries), 1000):
        async with redis.pipeline(transaction=False) as pipe:
            for _, entry in entries[begin : begin + 1000]:
                pipe.xadd(stream, entry)
            await pipe.execute()


async def timed(work: Callable[[], Awaitable[object]], repeat: int = 3) -> tuple[float, int]:
    """The median seconds of `repeat` runs of `work`, then the peak bytes of one more, traced."""
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        await work()
        seconds.append(time.perf_counter() - started)
    tracemalloc.start()
    await work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(seconds), peak


async def per_entry(redis: aioredis.Redis, keys: Keys, kept: bool, count: int = 10_000) -> float:
    """Redis memory per `requested` entry, with or without the arguments."""
    rng = random.Random(5)
    stream = f"{keys.prefix}bench:{'kept' if kept else 'digest'}"
    entries = []
    for n in range(count):
        args = arguments(rng, "delete_user")
        call = {
            "approval_id": f"a{n:010d}",
            "call_id": f"call_{n}",
            "tool": "delete_user",
            "agent": "ops",
            "requester": "UALICE",
            "channel": "CGENERAL",
            "digest": call_digest("delete_user", args),
            "quorum": 1,
            "approvers": "",
            **({"arguments": args} if kept else {}),
        }
        entries.append((0.0, fields("requested", f"r{n:016x}", time.time(), **call)))
    before = (await redis.info("memory"))["used_memory"]
    await fill(redis, stream, entries)
    after = (await redis.info("memory"))["used_memory"]
    await redis.delete(stream)
    return float(after - before) / count


async def measure(count: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(directory=Path(directory))
        server.start()
        redis = connect(server.url)
        keys = Keys("bench-review:")
        policy_file = Path(directory) / "proposal.toml"
        policy_file.write_text(PROPOSAL)
        settings = RuntimeSettings.from_environ({"POLICY_FILE": str(policy_file)})
        policy = load_policy(settings)
        trail = AuditTrail(redis, keys)
        try:
            entries = trail_of(count)
            baseline = (await redis.info("memory"))["used_memory"]
            started = time.perf_counter()
            await fill(redis, keys.audit, entries)
            filled = time.perf_counter() - started
            stored = (await redis.info("memory"))["used_memory"] - baseline
            print(
                f"trail: {count:,} entries written in {filled:.1f} s, "
                f"{stored / 2**20:.1f} MB in Redis"
            )
            size = sum(len(entry["details"]) + 40 for _, entry in entries)
            print(f"trail as JSON: about {size / 2**20:.1f} MB")

            async def replay() -> None:
                out = io.StringIO()
                await backtest(
                    trail, policy, "proposal.toml", since=EPOCH, until=None, as_json=False, out=out
                )

            async def count_stats() -> None:
                await decision_stats(trail.since(EPOCH), quick_seconds=5.0)

            for name, work in (
                ("backtest (summary)", replay),
                ("stats (every channel)", count_stats),
            ):
                seconds, peak = await timed(work)
                print(
                    f"{name:<24} {seconds:6.2f} s  {count / seconds:>9,.0f} entries/s"
                    f"  peak Python memory {peak / 2**20:5.1f} MB",
                    flush=True,
                )
            digest_only = await per_entry(redis, keys, kept=False)
            kept = await per_entry(redis, keys, kept=True)
            print(
                f"Redis per requested entry: {digest_only:,.0f} B digest only, {kept:,.0f} B with "
                f"its arguments (~80 B of JSON): {kept - digest_only:+,.0f} B"
            )
        finally:
            await redis.aclose()
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    args = parser.parse_args()
    header("audit reviews", f".venv/bin/python -m bench.audit_review --entries {args.entries}")
    asyncio.run(measure(args.entries))


if __name__ == "__main__":
    main()
