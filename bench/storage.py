"""What a waiting run costs in Redis, and how long it takes to save and load, by length.

    .venv/bin/python -m bench.storage [--repeat 50]

Runs of 1, 10 and 50 turns (each turn a tool call that needs no approval, then one that does)
on the SDK's ScriptedModel; then the run's record is saved as the worker saves it
(`RunStore.wait_for_approvals`: zlib of the compact RunState JSON, the envelope, the approval
fields, the deadline) and loaded as a resume loads it. Target: what we store <= 30% of the raw
RunState JSON at 50 turns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agents import RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call

from bench.harness import header
from runtime.calls.digest import call_digest
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.store import RunStore
from runtime.registry import load_registry


async def interrupted_state(turns: int) -> tuple[str, str]:
    """The RunState JSON of a run stopped for approval after `turns` model turns."""
    steps: list[Any] = [
        [function_call("list_users", {}, call_id=f"list_{n}")] for n in range(turns - 1)
    ]
    steps.append([function_call("delete_user", {"user_id": "u-100"}, call_id="delete")])
    steps.append([assistant_message("done")])
    agent = load_registry("tests.support.agents:REGISTRY").get("ops")
    config = RunConfig(model=ScriptedModel(steps), tracing_disabled=True)
    result = await Runner.run(
        agent, "list users, then delete u-100", max_turns=turns + 5, run_config=config
    )
    assert result.interruptions, "stopped for approval"
    state = result.to_state()
    return json.dumps(state.to_json(), separators=(",", ":")), state.to_string()


async def measure(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(directory=Path(directory))
        server.start()
        redis = connect(server.url)
        store = RunStore(redis, Keys("bench-storage:"))
        try:
            print(
                f"{'turns':>5} {'SDK to_string':>14} {'compact JSON':>13} {'stored':>8} "
                f"{'stored/raw':>10} {'in Redis':>9} {'save p50':>9} {'load p50':>9}"
            )
            for turns in (1, 10, 50):
                await one_size(store, redis, turns, repeat)
        finally:
            await redis.aclose()
            server.stop()


async def one_size(store: RunStore, redis: Any, turns: int, repeat: int) -> None:
    compact, pretty = await interrupted_state(turns)
    saves, loads, memory = [], [], []
    for _ in range(repeat):
        run_id = new_run_id()
        envelope = RunEnvelope(
            run_id=run_id,
            root_agent="ops",
            task="list users, then delete u-100",
            conversation=Conversation(channel="CBENCH", requester="UALICE", thread="1.1"),
            created_at=time.time(),
        )
        await store.create(envelope)
        lease = (await store.claim(envelope.run_id, kind="start", round_=0)).lease
        assert lease is not None
        call = PendingCall(
            approval_id=new_approval_id(),
            call_id="delete",
            tool="delete_user",
            agent="ops",
            arguments='{"user_id":"u-100"}',
            expires_at=time.time() + 3600,
            digest=call_digest("delete_user", '{"user_id":"u-100"}'),
        )
        waiting = envelope.model_copy(update={"round": 1, "calls": (call,)})
        started = time.perf_counter()
        await store.wait_for_approvals(
            waiting, compact, lease=lease, previous=envelope, reminders={}, self_ok=False
        )
        saves.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        record = await store.load(run_id)
        loads.append((time.perf_counter() - started) * 1000)
        assert record is not None and record.state == compact
        memory.append(int(await redis.memory_usage(f"bench-storage:run:{run_id}", samples=0)))
    stored = len(await redis.hget(f"bench-storage:run:{run_id}", "state"))
    print(
        f"{turns:>5} {len(pretty):>13,}B {len(compact):>12,}B {stored:>7,}B "
        f"{stored / len(compact):>9.0%} {statistics.median(memory):>8,.0f}B "
        f"{statistics.median(saves):>7.2f}ms {statistics.median(loads):>7.2f}ms",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    header("storage per waiting run", f".venv/bin/python -m bench.storage --repeat {args.repeat}")
    asyncio.run(measure(args.repeat))


if __name__ == "__main__":
    main()
