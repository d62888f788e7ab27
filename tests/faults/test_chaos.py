"""Chaos, on real processes: while a dozen runs wait for approvals and rejections, workers are
SIGKILLed at random moments (and replaced, so that two stay alive), the model answers 5xx in
bursts longer than the `openai` client's own retries, and once, while a tool runs, Redis stops
for longer than the journal's old deadline (30 s). The runs make every kind of call the
registry has: function tools, shell calls, a tool reached through a `handoff(agent)` object, and
an agent tool whose inner agent asks in turn (`tests/support/chaos_plans.py`). The blows are in
`tests/support/chaos_blows.py`, a person's side of each run in `tests/support/chaos_people.py`.

Whatever the seed, a person must see what the design promises:
- no rejected or undecided call ever ran (the test agents' ledger, written as each tool starts);
- every approved call ran at most once, and once more only for each **Run again** a person
  clicked on its "may have run" card (a kill inside the call posts one, never runs it again);
- every run's thread got its ending (its answer, quoting what each call did, or a failure
  message) within a bounded time, and no process died that the test did not kill.

The seed picks the plans and the chaos, not the timing. `CHAOS_SEED=<seed>` reruns a failing
one: `CHAOS_SEED=123 pytest -m chaos -s tests/faults/test_chaos.py`.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.db.local import RedisServer
from tests.support.chaos_blows import OUTAGE_SECONDS, Chaos, executed, ledger
from tests.support.chaos_people import (
    RUNS_DEADLINE,
    START_EVERY,
    Ending,
    People,
    play,
    settled,
    unfinished,
)
from tests.support.chaos_plans import ChaosModel, PlannedCall, plan_run
from tests.support.deployment import Deployment, what_failed

pytestmark = pytest.mark.chaos

RUNS = 14


# --- the test ------------------------------------------------------------------------------------


def hits_by_kills(
    entries: list[dict[str, Any]], journaled: list[tuple[str, float]], deaths: dict[str, float]
) -> Counter[str]:
    """Executions a kill landed in: by a worker that died before the call's output was
    journaled. Each may have happened once more than the design's "exactly once"."""
    hits: Counter[str] = Counter()
    for entry in entries:
        died = deaths.get(entry["dyno"])
        if died is None:
            continue
        if not any(call_id == entry["call_id"] and at < died for call_id, at in journaled):
            hits[entry["call_id"]] += 1
    return hits


@pytest.fixture
async def deployment(durable_redis: RedisServer, tmp_path: Path) -> AsyncIterator[Deployment]:
    deployment = Deployment(durable_redis.url, "chaos:", tmp_path)
    await deployment.start()
    try:
        yield deployment
    finally:
        await deployment.stop()


@pytest.mark.timeout(240 + OUTAGE_SECONDS)
async def test_runs_end_and_approved_calls_run_once_through_kills_and_model_outages(
    deployment: Deployment, durable_redis: RedisServer
) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1_000_000))
    print(f"chaos: seed={seed} (rerun with CHAOS_SEED={seed})")
    plans = [plan_run(n, random.Random(f"{seed}:plan:{n}")) for n in range(RUNS)]
    model = ChaosModel(plans)
    deployment.model.script = model
    web = await deployment.web()
    chaos = Chaos(
        deployment=deployment,
        redis=durable_redis,
        web=web,
        model=model,
        rng=random.Random(f"{seed}:chaos"),
    )
    chaos.redis_up.set()
    chaos.start_worker()
    chaos.start_worker()

    began = time.monotonic()
    stop = asyncio.Event()
    people = People(deployment=deployment, redis_up=chaos.redis_up)
    chaos_task = asyncio.create_task(chaos.run(stop))
    try:
        async with (
            asyncio.timeout(RUNS * START_EVERY + RUNS_DEADLINE + OUTAGE_SECONDS),
            asyncio.TaskGroup() as group,
        ):
            players = [
                group.create_task(
                    play(deployment, plan, random.Random(f"{seed}:play:{plan.number}"), people)
                )
                for plan in plans
            ]
        stop.set()
        await chaos_task
        chaos.check_alive()
        await settled(deployment)
        await chaos.check_stopping()
    except BaseException as error:
        error.add_note(
            f"{what_failed(error)}\n"
            f"chaos: seed={seed} kills={chaos.kills} bursts={chaos.bursts} "
            f"outages={chaos.outages}\n"
            f"{await unfinished(deployment, plans)}\nlogs:\n{deployment.logs_text()}"
        )
        raise
    finally:
        stop.set()
        await asyncio.gather(chaos_task, return_exceptions=True)
    took = time.monotonic() - began

    endings = [player.result() for player in players]
    entries = await ledger(deployment)
    hits = hits_by_kills(entries, await executed(deployment), chaos.deaths)
    runs_of = Counter(entry["call_id"] for entry in entries)
    print(
        f"chaos: seed={seed} kills={chaos.kills} (aimed at a running tool: {chaos.aimed}, "
        f"landed in one: {sum(hits.values())}) bursts={chaos.bursts} model_5xx={model.errors} "
        f"redis_outages={chaos.outages} run_again={dict(people.run_again)} "
        f"not_again={sorted(people.not_again)} asked_again={dict(people.asked_again)} "
        f"runs={RUNS} calls={sum(len(p.calls) for p in plans)} approved={len(people.approved)} "
        f"ran_twice_or_more={ {c: n for c, n in runs_of.items() if n > 1} } "
        f"gave_up={[e.plan.number for e in endings if not e.answered]} "
        f"extra_threads={sum(len(e.roots) - 1 for e in endings)} "
        f"extra_endings={sum(len(e.endings) - 1 for e in endings)} took={took:.0f}s"
    )
    context = f"seed={seed}; logs in {deployment.logs}"
    calls = {call.call_id: call for plan in plans for call in plan.all_calls}
    for entry in entries:
        call = calls.get(entry["call_id"])
        assert call is not None, f"a tool nobody was asked about ran: {entry} ({context})"
        assert call.reason is None, f"rejected {call.call_id} ran ({context})"
        assert call.call_id in people.approved, f"undecided {call.call_id} ran ({context})"
        assert entry["arguments"] == call.arguments, f"not what was approved ran ({context})"
    for ending in endings:
        check_ending(ending, runs_of, people, context)


def check_ending(ending: Ending, runs_of: Counter[str], people: People, context: str) -> None:
    """The thread's ending quotes what each call did (or that it may have run and was not run
    again; an agent tool, what its inner agent was told); each approved call ran once, once more
    only per Run again, or at most that if the run gave up."""
    text = ending.endings[0].text
    if ending.answered:
        assert text.startswith(f"{ending.plan.task} done: "), f"{text} ({context})"
    else:  # the one failure these faults may cause: a job out of deliveries
        assert "Something kept failing" in text, f"{text} ({context})"
    told: dict[str, str] = {}
    for segment in text.removeprefix(f"{ending.plan.task} done: ").split(" | "):
        call_id, _, said = segment.partition("=")
        told[call_id] = said
    for call in ending.plan.calls:
        said = told.get(call.call_id, "")
        assert not ending.answered or expected(call, people) in said, (
            f"the model was not told what {call.call_id} did: {said!r} ({context})"
        )
        asked_inside = call.reason is None and call.call_id not in people.not_again
        for reason in (call.reason, call.inner.reason if call.inner and asked_inside else None):
            assert not ending.answered or not reason or reason in said, (
                f"the model was not told why {call.call_id} was rejected ({context})"
            )
    for call in ending.plan.all_calls:
        if call.inner is not None or call.call_id not in people.approved:
            continue  # an agent tool's own run is its inner call's; the rest never ran
        ran, again = runs_of[call.call_id], people.run_again[call.call_id]
        assert (1 if ending.answered else 0) <= ran <= 1 + again, (
            f"{call.call_id} ran {ran} times, {again} Run again click(s) ({context})"
        )


def expected(call: PlannedCall, people: People) -> str:
    """What the model was told of `call` says (a shell's, inside its output list)."""
    if call.reason is not None:
        return f"The call to {call.tool} was rejected"
    if call.call_id in people.not_again:
        return f"The call to {call.tool} may have run earlier"
    if call.inner is not None:
        return f"inner {expected(call.inner, people)}"
    return call.output
