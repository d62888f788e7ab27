"""100,000 waiting approvals in one Redis: memory, and what an expiry tick costs.

    .venv/bin/python -m bench.expiry_scale [--pending 100000]

Fills a private Redis with waiting runs (one approval each, a 1-turn state, stored exactly as
the worker stores them), reporting memory at 1,000, 10,000 and `--pending`. At each size it times
expiry ticks (`DuePoller.sweep` with the real expiry handler: claim with a lease, record the
expiry in the decision script, remove) with 0, 10 and 100 approvals due. The cost must follow
what is due, not what is pending.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import header
from bench.storage import interrupted_state
from runtime.calls.digest import call_digest
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.decisions.expiry import Expiry
from runtime.decisions.recorder import DecisionRecorder
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.jobs.due_set import DuePoller
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.store import RunStore
from runtime.reporter import Activity, Failure, RunView

FAR = 30 * 86400.0


class SilentReporter:
    """Expiry only reaches Slack for posted cards; these runs have none."""

    async def approval_expired(self, run: RunView, call: PendingCall) -> None: ...
    async def run_started(self, run: RunView) -> str:
        return ""

    async def progress(self, run: RunView, message_id: str | None, activity: Activity) -> str:
        return ""

    async def cards_posted(self, run: RunView, message_id: str, activity: Activity) -> str:
        return message_id

    def shows_text(self, run: RunView) -> bool:
        return False

    async def approval_requested(self, run: RunView, call: PendingCall) -> str:
        return ""

    async def retract(self, run: RunView, message_id: str) -> None: ...
    async def approval_reminder(self, run: RunView, call: PendingCall) -> None: ...
    async def call_refused(self, run: RunView, call: PendingCall) -> None: ...
    async def edit_previewed(self, run: RunView, call: PendingCall) -> None: ...
    async def run_finished(self, run: RunView, output: str) -> None: ...
    async def run_stopped(self, run: RunView, user_id: str) -> None: ...
    async def working(self, run: RunView) -> None: ...

    async def run_failed(
        self, run: RunView, failure: Failure, detail: str, ran: Sequence[str] = ()
    ) -> None: ...


async def add_waiting(store: RunStore, state: str, count: int) -> list[tuple[str, str]]:
    now = await store.server_time()

    async def one() -> tuple[str, str]:
        envelope = RunEnvelope(
            run_id=new_run_id(),
            root_agent="ops",
            task="delete u-100",
            conversation=Conversation(channel="CBENCH", requester="UALICE", thread="1.1"),
            created_at=now,
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
            expires_at=now + FAR,
            digest=call_digest("delete_user", '{"user_id":"u-100"}'),
        )
        waiting = envelope.model_copy(update={"round": 1, "calls": (call,)})
        await store.wait_for_approvals(
            waiting, state, lease=lease, previous=envelope, reminders={}, self_ok=False
        )
        return envelope.run_id, call.approval_id

    made: list[tuple[str, str]] = []
    for start in range(0, count, 500):
        made += await asyncio.gather(*(one() for _ in range(min(500, count - start))))
    return made


async def make_due(redis: Any, keys: Keys, runs: list[tuple[str, str]]) -> None:
    """Move these approvals' deadlines (hash and sorted set alike) into the past."""
    seconds, micros = await redis.time()
    past = seconds + micros / 1e6 - 1
    async with redis.pipeline(transaction=False) as pipe:
        for run_id, approval_id in runs:
            pipe.hset(keys.run(run_id), f"deadline:{approval_id}", past)
            pipe.zadd(keys.deadlines, {f"{run_id}:{approval_id}": past})
        await pipe.execute()


async def measure(pending: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(directory=Path(directory))
        server.start()
        redis = connect(server.url)
        keys = Keys("bench-expiry:")
        store = RunStore(redis, keys)
        expiry = Expiry(
            recorder=DecisionRecorder(redis, keys), reporter=SilentReporter(), store=store
        )
        poller = DuePoller(redis=redis, due={keys.deadlines: expiry.handle}, name="bench")
        state, _ = await interrupted_state(1)
        try:
            baseline = (await redis.info("memory"))["used_memory"]
            runs: list[tuple[str, str]] = []
            print(f"{'pending':>8} {'memory':>10} {'per run':>8}  tick p50 with 0 / 10 / 100 due")
            for size in (1_000, 10_000, pending):
                started = time.perf_counter()
                runs += await add_waiting(store, state, size - len(runs))
                filled = time.perf_counter() - started
                used = (await redis.info("memory"))["used_memory"] - baseline
                ticks = [await tick_ms(poller, redis, keys, runs, due) for due in (0, 10, 100)]
                print(
                    f"{size:>8,} {used / 2**20:>8.1f}MB {used / size:>7,.0f}B  "
                    + " / ".join(f"{t:7.2f}ms" for t in ticks)
                    + f"   (filled in {filled:.0f} s)",
                    flush=True,
                )
        finally:
            await redis.aclose()
            server.stop()


async def tick_ms(poller: DuePoller, redis: Any, keys: Keys, runs: list[Any], due: int) -> float:
    times = []
    for _ in range(5):
        chosen = [runs.pop() for _ in range(due)]  # expired ones are used up
        await make_due(redis, keys, chosen)
        started = time.perf_counter()
        claimed = await poller.sweep()
        times.append((time.perf_counter() - started) * 1000)
        assert claimed == due, (claimed, due)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=100_000)
    args = parser.parse_args()
    header("expiry at scale", f".venv/bin/python -m bench.expiry_scale --pending {args.pending}")
    asyncio.run(measure(args.pending))


if __name__ == "__main__":
    main()
