"""A person's side of each run of the chaos test (`tests/faults/test_chaos.py`): start it, decide
each
card as it appears (an agent tool's inner card once the agent tool is approved; "may have run"
cards at random), and wait for the thread's ending."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from runtime.db.keys import JOB_GROUP
from tests.support.chaos_blows import OUTAGE_SECONDS, ledger
from tests.support.chaos_plans import Plan, PlannedCall
from tests.support.deployment import Deployment
from tests.support.fake_slack import Message

START_EVERY = 3.0
"""Seconds between two runs' starts: the chaos goes on for about a minute."""
RUNS_DEADLINE = 120.0
"""Bounds each wait of a run (for its cards, for its ending); the whole test is bounded by
`RUNS * START_EVERY + RUNS_DEADLINE` besides."""
LOST = "may have run; its result was lost"


@dataclass(frozen=True)
class Ending:
    plan: Plan
    roots: list[Message]
    """The run's threads: one, unless a kill made the run start a second."""
    endings: list[Message]
    """Answers and failure messages, in the order posted."""

    @property
    def answered(self) -> bool:
        return not self.endings[0].text.startswith(":x:")


def roots_of(deployment: Deployment, plan: Plan) -> list[Message]:
    return [m for m in deployment.slack.roots() if m.text.endswith(f"*ops*: {plan.task}")]


def card_of(deployment: Deployment, plan: Plan, call: PlannedCall) -> Message | None:
    """An undecided card for the call, in any thread of its run."""
    threads = {root.ts for root in roots_of(deployment, plan)}
    tag = re.compile(rf"\b{call.tag}\b")
    for card in deployment.slack.cards():
        if (
            card.thread_ts in threads
            and tag.search(card.all_text())
            and "approve" in card.action_ids()
            and LOST not in card.all_text()
        ):
            return card
    return None


def lost_cards(deployment: Deployment, plan: Plan) -> list[tuple[PlannedCall, Message]]:
    """The run's undecided "may have run" cards, with their calls."""
    threads = {root.ts for root in roots_of(deployment, plan)}
    found = []
    for card in deployment.slack.cards():
        text = card.all_text()
        if card.thread_ts in threads and LOST in text and "approve" in card.action_ids():
            found += [(c, card) for c in plan.all_calls if re.search(rf"\b{c.tag}\b", text)]
    return found


def endings_of(deployment: Deployment, plan: Plan) -> list[Message]:
    """Answers and failure messages, in any thread of the run."""
    roots = roots_of(deployment, plan)
    return [m for root in roots for m in deployment.slack.final_answers(root.ts)]


async def round_cards(
    deployment: Deployment, plan: Plan, calls: tuple[PlannedCall, ...]
) -> list[Message] | None:
    """The round's cards once all are posted; None if the run ended first (it gave up)."""

    def ready() -> bool:
        cards = [card_of(deployment, plan, call) for call in calls]
        return bool(endings_of(deployment, plan)) or all(cards)

    await deployment.slack.wait_for(ready, RUNS_DEADLINE, f"the cards of {plan.task}")
    cards = [card_of(deployment, plan, call) for call in calls]
    if endings_of(deployment, plan):
        return None
    return [card for card in cards if card is not None]


@dataclass(kw_only=True)
class People:
    """The approvers' side: who clicked what."""

    deployment: Deployment
    approved: set[str] = field(default_factory=set)
    """Call ids someone approved (recorded just before the click)."""
    run_again: Counter[str] = field(default_factory=Counter)
    """Call id -> how often someone clicked Run again on its "may have run" card."""
    not_again: set[str] = field(default_factory=set)
    """Call ids whose last "may have run" card someone rejected."""
    decided: set[str] = field(default_factory=set)
    """Call ids whose card someone decided."""
    asked_again: Counter[str] = field(default_factory=Counter)
    """Call id -> how often its card came back after it was decided: an agent tool cut off while
    its inner run went on runs again, and its inner run starts afresh, asking its call again
    (the journal then replays the call if it ran)."""
    reject_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One reject at a time: its modal is then the newest one."""
    redis_up: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while Redis answers (`Chaos.redis_up`): a run starts only then."""

    async def decide(self, call: PlannedCall, card: Message) -> None:
        ran = {entry["call_id"] for entry in await ledger(self.deployment)}
        assert call.call_id not in ran, f"{call.call_id} ran before anyone decided it"
        if call.reason is None:
            self.approved.add(call.call_id)
        await self.click_until_decided(card, call.decider, call.reason)
        self.decided.add(call.call_id)

    async def decide_again(self, call: PlannedCall, card: Message) -> None:
        """The same decision, for a call asked about again (`asked_again`)."""
        self.asked_again[call.call_id] += 1
        await self.click_until_decided(card, call.decider, call.reason)

    async def decide_lost(self, call: PlannedCall, card: Message, again: bool) -> None:
        """Run again, or reject: the call may have run."""
        if again:
            self.run_again[call.call_id] += 1  # before the click: it may run at once
            self.not_again.discard(call.call_id)
        else:
            self.not_again.add(call.call_id)
        reason = None if again else f"it may have done it ({call.tag})"
        await self.click_until_decided(card, call.decider, reason)

    async def click_until_decided(self, card: Message, user: str, reason: str | None) -> None:
        """Approve (`reason` None) or reject, again until the card shows the decision: while
        Redis is away the web answers "try again", as a person would be told."""
        deadline = time.monotonic() + OUTAGE_SECONDS + RUNS_DEADLINE
        while "approve" in card.action_ids():
            assert time.monotonic() < deadline, f"{card.text}: never decided"
            with contextlib.suppress(AssertionError):  # the modal did not open: Redis away
                if reason is None:
                    status, _ = await self.deployment.sender.click(card, "approve", user=user)
                else:
                    async with self.reject_lock:
                        status, _ = await self.deployment.sender.reject(
                            card, user=user, reason=reason
                        )
                assert status == 200
            for _ in range(30):
                if "approve" not in card.action_ids():
                    return
                await asyncio.sleep(0.1)


async def play(deployment: Deployment, plan: Plan, rng: random.Random, people: People) -> Ending:
    """Start the run, decide each call as its card appears, and wait for the thread's ending."""
    await asyncio.sleep(plan.number * START_EVERY)
    await people.redis_up.wait()
    status, _ = await deployment.sender.command(plan.task)
    assert status == 200
    watcher = asyncio.ensure_future(decide_lost_cards(deployment, plan, rng, people))
    try:
        for calls in plan.rounds:
            cards = await round_cards(deployment, plan, calls)
            if cards is None:
                break
            for call, card in rng.sample(list(zip(calls, cards, strict=True)), len(calls)):
                await asyncio.sleep(rng.uniform(0, 1.0))  # a person takes a moment
                await people.decide(call, card)
            if not await decide_inner_calls(deployment, plan, calls, rng, people):
                break
        endings = await deployment.slack.wait_for(
            lambda: endings_of(deployment, plan),
            RUNS_DEADLINE + OUTAGE_SECONDS,
            f"ending of {plan.task}",
        )
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return Ending(plan, roots_of(deployment, plan), endings)


async def decide_inner_calls(
    deployment: Deployment,
    plan: Plan,
    calls: tuple[PlannedCall, ...],
    rng: random.Random,
    people: People,
) -> bool:
    """Once an agent tool is approved, its inner agent asks for its own call: decide that card
    too. False if the run ended first."""
    for call in calls:
        inner = call.inner
        if inner is None or call.reason is not None:
            continue

        def ready(inner: PlannedCall = inner, outer: PlannedCall = call) -> bool:
            # Its outer call cut off and not run again: the inner agent never asks.
            return bool(
                endings_of(deployment, plan)
                or card_of(deployment, plan, inner)
                or outer.call_id in people.not_again
            )

        await deployment.slack.wait_for(ready, RUNS_DEADLINE, f"the inner card of {plan.task}")
        if endings_of(deployment, plan):
            return False
        card = card_of(deployment, plan, inner)
        if card is not None:
            await asyncio.sleep(rng.uniform(0, 1.0))
            await people.decide(inner, card)
    return True


async def decide_lost_cards(
    deployment: Deployment, plan: Plan, rng: random.Random, people: People
) -> None:
    """Whenever the run asks whether a call that may have run should run again: Run again, or
    reject, at random; a call asked about again after its decision: the same (until
    cancelled)."""
    while True:
        for call, card in lost_cards(deployment, plan):
            await asyncio.sleep(rng.uniform(0, 0.5))
            await people.decide_lost(call, card, again=rng.random() < 0.5)
        for call in plan.all_calls:
            again = card_of(deployment, plan, call) if call.call_id in people.decided else None
            if again is not None:
                await people.decide_again(call, again)
        await asyncio.sleep(0.1)


async def unfinished(deployment: Deployment, plans: list[Plan]) -> str:
    """Where each run without an ending stands: its threads, cards, record and jobs."""
    lines = []
    for plan in plans:
        if endings_of(deployment, plan):
            continue
        threads = {root.ts for root in roots_of(deployment, plan)}
        cards = [c for c in deployment.slack.cards() if c.thread_ts in threads]
        run_ids = {c.actions()[0]["value"].split(":")[0] for c in cards if c.actions()}
        records = {
            run_id: await deployment.redis.hmget(
                deployment.keys.run(run_id), ["status", "round", "fence"]
            )
            for run_id in run_ids
        }
        lines.append(
            f"{plan.task}: {len(threads)} thread(s), cards {[c.all_text()[:300] for c in cards]}, "
            f"records {records}"
        )
    pending: Any = await deployment.redis.xpending_range(
        deployment.keys.jobs, JOB_GROUP, "-", "+", 100
    )
    dead: Any = await deployment.redis.xrange(deployment.keys.dead_jobs)
    lines.append(f"pending jobs: {pending}")
    lines.append(f"dead jobs: {dead}")
    return "\n".join(lines)


async def settled(deployment: Deployment, timeout: float = 30) -> None:
    """No job left in the stream: every delivery finished, nothing more can run."""
    deadline = time.monotonic() + timeout
    while await deployment.redis.xlen(deployment.keys.jobs) > 0:
        assert time.monotonic() < deadline, f"jobs still queued:\n{deployment.logs_text()}"
        await asyncio.sleep(0.1)
