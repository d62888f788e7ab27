"""What a thread's history costs: Redis memory per turn, and the latency loading it adds.

    .venv/bin/python -m bench.conversation_cost [--repeat 200]

A turn is what a run that answers adds (`ThreadHistory.add_turn`): the person's words (a
40-character task) and the answer (a 400-character reply). At 0, 10 and 100 turns (100 turns is
the default `CONVERSATION_MAX_ITEMS`, 200 items), a reply's run loads the history before its
first model call (`ThreadHistory.input_for`); the added latency is that load, against a private
Redis on this machine. Memory is `MEMORY USAGE` of the thread's list and its last-run key.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import header, percentile
from runtime.conversations.session import conversation_id
from runtime.conversations.threads import ThreadHistory
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.jobs.contracts import Conversation, new_run_id
from runtime.settings import RuntimeSettings

TASK = "delete u-100 and then restart the api now"[:40]
ANSWER = ("Deleted user u-100 (Ada Lovelace); restarted the api, healthy after 2 s. " * 6)[:400]


async def measure(repeat: int) -> None:
    defaults = RuntimeSettings.from_environ({})
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(directory=Path(directory))
        server.start()
        redis = connect(server.url)
        keys = Keys("bench-conversation:")
        history = ThreadHistory(
            redis=redis,
            keys=keys,
            ttl_seconds=defaults.conversation_ttl_seconds,
            max_items=defaults.conversation_max_items,
        )
        try:
            print(
                f"{'turns':>5} {'items':>5} {'in Redis':>9} {'per turn':>9} "
                f"{'load p50':>9} {'load p99':>9} {'add p50':>8}"
            )
            for turns in (0, 10, 100):
                await one_size(history, redis, keys, turns, repeat)
        finally:
            await redis.aclose()
            server.stop()


async def one_size(history: ThreadHistory, redis: Any, keys: Keys, turns: int, repeat: int) -> None:
    thread = f"{time.time():.6f}"
    conversation = Conversation(channel="CBENCH", requester="UALICE", thread=thread)
    run_id = new_run_id()
    await history.remember("CBENCH", thread, run_id, "ops")
    adds = []
    for _ in range(turns):
        started = time.perf_counter()
        await history.add_turn(conversation, TASK, ANSWER, run_id=run_id, agent="ops")
        adds.append((time.perf_counter() - started) * 1000)
    loads = []
    for _ in range(repeat):
        started = time.perf_counter()
        given = await history.input_for(conversation, "and the search service?")
        loads.append((time.perf_counter() - started) * 1000)
    assert len(given) == 2 * turns + 1
    name = conversation_id("CBENCH", thread)
    items = keys.conversation(name)
    memory = int(await redis.memory_usage(items, samples=0) or 0)
    memory += int(await redis.memory_usage(keys.thread(name), samples=0) or 0)
    per_turn = f"{memory / turns:>8,.0f}B" if turns else f"{'':>9}"
    add = f"{statistics.median(adds):>6.2f}ms" if adds else f"{'':>8}"
    print(
        f"{turns:>5} {2 * turns:>5} {memory:>8,}B {per_turn} "
        f"{statistics.median(loads):>7.2f}ms {percentile(loads, 99):>7.2f}ms {add}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    header(
        "a thread's history: memory per turn, load latency",
        f".venv/bin/python -m bench.conversation_cost --repeat {args.repeat}",
    )
    asyncio.run(measure(args.repeat))


if __name__ == "__main__":
    main()
