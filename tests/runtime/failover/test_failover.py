"""Redis fails over under load, on real processes: what is acknowledged survives.

A primary, a replica and three Sentinels (`tests.support.replicated_redis`), the Procfile's web
process
and two workers pointed at the Sentinels. Runs start every few tenths of a second; a person
approves each run's card as it appears, and clicks again when told to try again. Meanwhile the
replication link is held back (the primary has sent, the replica has not received, as on a slow
network) until some writes are in flight, the primary is SIGKILLed, what was held is dropped,
and Sentinel promotes the replica. The killed server then comes back as a replica of the new
primary (as a supervisor restarting it would).

With `REDIS_MIN_REPLICAS=1` nothing acknowledged may be lost: every click answered OK is in the
new primary's audit trail, every run whose start was acknowledged finishes, and no tool runs
twice. A click told to try again may find, on its next try, that its earlier attempt counted
after all (it reached the replica late) and the run has finished; that is no loss.
With `REDIS_MIN_REPLICAS=0` the same scenario loses what was acknowledged while the link was held
(decisions, starts, or a tool's recorded output); the test prints how much, and asserts that
something was lost, to show the setting's point. It also checks that every lost decision was
said: its card came back (or said it no longer counts) and the person who clicked was told, and
only those were; the person then approves again, and since both workers live on, the output of a
tool that ran under the lost approval is written back and reused: no tool runs twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.words import failovers as lost_words
from bot.words import runs as messages
from tests.support.deployment import Deployment, what_failed
from tests.support.fake_openai import ModelRequest, Reply, message, tool_call
from tests.support.fake_slack import Message
from tests.support.processes import wait_for_log
from tests.support.replicated_redis import ReplicatedRedis

pytestmark = pytest.mark.chaos

RUNS = 16
START_EVERY = 0.4
FAULT_AFTER = 2.5
"""Seconds after the first start when the link is held back."""
HOLD_AT_MOST = 2.0
HOLD_UNTIL_ACKED = 2
"""The primary is killed once this many acknowledgements came while the link was held (or
after `HOLD_AT_MOST`): with N=0 those are the writes in flight."""
THINK = 1.0
"""Seconds a person looks at a card before clicking: clicks land while the link is held."""
RUN_DEADLINE = 45.0
RETRY_EVERY = 0.5
WORKER_ENV = {
    # Jobs are tried again in place while Redis is away; a job taken over by the other worker
    # in the switch still counts a delivery, and must not run out of them.
    "JOB_MAX_DELIVERIES": "20",
    "REMINDER_AT": "0",
    # Longer than a worker takes to write back what the failover lost of its tools' outputs
    # (about a second once the new primary answers), as in production (30 s): a job the new
    # primary still lists as the other worker's is taken over only after that.
    "JOB_IDLE_TIMEOUT_SECONDS": "10",
}
LOST_NOTES = {
    lost_words.lost_note("restart_service", "approved"),
    lost_words.void_note("restart_service", "approved"),
}
"""What a person whose approval a failover lost is told."""
AGAIN_AT_MOST = 3
SETTLE_SECONDS = 3.0
"""After the runs: time for the web to say the last losses it found (it looks every second)."""
RETRYABLE = (messages.NOT_CONFIRMED, messages.TRY_AGAIN)
TAKEN_BACK = "(the card was taken back)"


def task_of(number: int) -> str:
    return f"failover run {number}"


def script(request: ModelRequest) -> Reply:
    number = int(request.task.rsplit(" ", 1)[1])
    told = request.tool_outputs
    call_id = f"call_f{number}"
    if call_id not in told:
        return [tool_call("restart_service", {"service": f"svc{number}"}, call_id)]
    return [message(f"{task_of(number)} done: {told[call_id]}")]


@dataclass(kw_only=True)
class Tally:
    """What the people were told, and when."""

    starts_acked: dict[int, float] = field(default_factory=dict)
    clicks_acked: dict[int, tuple[str, str, float]] = field(default_factory=dict)
    """Run number -> (run id, approval id, when the click was answered OK)."""
    first_acked: dict[int, tuple[str, float]] = field(default_factory=dict)
    """Run number -> (`run_id:approval_id`, wall time) of its first click answered OK."""
    told_lost: set[int] = field(default_factory=set)
    """Runs whose clicker was told their approval was lost."""
    retries: Counter[str] = field(default_factory=Counter)
    finished: set[int] = field(default_factory=set)
    stuck: dict[int, str] = field(default_factory=dict)
    """Runs without an ending, and where they stood."""

    acked: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at each acknowledgement."""

    def acked_since(self, moment: float) -> int:
        times = [*self.starts_acked.values(), *(at for _, _, at in self.clicks_acked.values())]
        return sum(1 for at in times if at >= moment)


def ids_of(card: Message) -> tuple[str, str]:
    """The run and approval a card with an Approve button asks about."""
    value = next(a["value"] for a in card.actions() if a["action_id"] == "approve")
    run_id, approval_id = str(value).split(":")[:2]
    return run_id, approval_id


@dataclass(kw_only=True)
class Person:
    deployment: Deployment
    tally: Tally

    @property
    def slack(self) -> Any:
        return self.deployment.slack

    async def start(self, number: int, deadline: float) -> bool:
        """`/agent ops ...`; resent as Slack resends it (same trigger) when told to retry."""
        trigger = f"trigger-failover-{number}-{time.time_ns()}"
        while time.monotonic() < deadline:
            status, body = await self.deployment.sender.command(task_of(number), trigger_id=trigger)
            text = body.get("text", "")
            if status == 200 and text == messages.command_starting("ops"):
                self.tally.starts_acked[number] = time.monotonic()
                self.tally.acked.set()
                return True
            self.tally.retries["start"] += 1
            await asyncio.sleep(RETRY_EVERY)
        return False

    def card(self, number: int, *, open_only: bool = True, besides: str = "") -> Message | None:
        """The run's first card that still has its buttons (or, not `open_only`, any), other
        than the message `besides`."""
        roots = [m for m in self.slack.roots() if m.text.endswith(f"*ops*: {task_of(number)}")]
        threads = {root.ts for root in roots}
        cards = [
            c
            for c in self.slack.cards()
            if c.thread_ts in threads
            and c.ts != besides
            and ("approve" in c.action_ids() or not open_only)
        ]
        return cards[0] if cards else None

    def ending(self, number: int) -> bool:
        return self.answers(number) > 0

    def answers(self, number: int) -> int:
        roots = [m for m in self.slack.roots() if m.text.endswith(f"*ops*: {task_of(number)}")]
        return sum(len(self.slack.final_answers(root.ts)) for root in roots)

    async def click_once(self, card: Message, user: str) -> tuple[str | None, float]:
        """One click on Approve: what the clicker was told privately (None: nothing, and the
        card was redrawn), and when the answer came."""
        seen = len(self.slack.calls)
        status, _ = await self.deployment.sender.click(card, "approve", user=user)
        assert status == 200

        def said() -> str | None:
            for call in self.slack.calls[seen:]:
                if call.method == "chat.postEphemeral" and call.args.get("user") == user:
                    return str(call.args.get("text", ""))
            return None

        def redrawn() -> bool:
            return any(
                call.method == "chat.update" and call.args.get("ts") == card.ts
                for call in self.slack.calls[seen:]
            )

        await self.slack.wait_for(
            lambda: said() is not None or redrawn() or self.taken_back(card),
            15,
            f"an answer to {user}'s click",
        )
        answered = time.monotonic()
        if said() is None and not redrawn():
            return TAKEN_BACK, answered
        if said() is None:
            # A worker may redraw the card too; a "try again" would follow within moments.
            await asyncio.sleep(0.3)
        return said(), answered

    def taken_back(self, card: Message) -> bool:
        """Deleted: a card posted by a delivery that was fenced off right after (its worker takes
        its own post back, and the card of the delivery that took over stays)."""
        return card.ts not in self.slack.messages

    def seen_instead(
        self, number: int, card: Message, ids: tuple[str, str]
    ) -> tuple[Message, tuple[str, str]]:
        """Nobody can click a deleted message: the card the person sees instead, and what it
        asks about (one already decided keeps the ids of the card clicked)."""
        seen = self.card(number) or self.card(number, open_only=False)
        if seen is None:
            return card, ids
        return seen, ids_of(seen) if "approve" in seen.action_ids() else ids

    def _acked(self, number: int, run_id: str, approval_id: str, answered: float) -> None:
        self.tally.clicks_acked[number] = (run_id, approval_id, answered)
        self.tally.first_acked.setdefault(number, (f"{run_id}:{approval_id}", time.time()))
        self.tally.acked.set()

    def told_lost(self, number: int) -> int:
        """How often the run's clicker was told privately that their approval was lost."""
        user = f"UAPPROVER{number:02d}"
        return sum(e["user"] == user and e["text"] in LOST_NOTES for e in self.slack.ephemerals)

    async def approve(self, number: int, card: Message, deadline: float) -> bool:
        """Click Approve until it is answered OK: the card redrawn, no "try again"."""
        user = f"UAPPROVER{number:02d}"
        run_id, approval_id = ids_of(card)
        while time.monotonic() < deadline:
            if self.taken_back(card):
                await asyncio.sleep(RETRY_EVERY)
                card, (run_id, approval_id) = self.seen_instead(number, card, (run_id, approval_id))
                continue
            if "approve" not in card.action_ids():
                # A "try again" decision the replica confirmed late: the card now shows it, as
                # good an acknowledgement as a redraw after a click (nobody clicks again).
                self._acked(number, run_id, approval_id, time.monotonic())
                return True
            text, answered = await self.click_once(card, user)
            if text is None:
                self._acked(number, run_id, approval_id, answered)
                return True
            if text == messages.APPROVAL_UNKNOWN:
                # An earlier attempt's decision may have reached the replica after all, and
                # the run gone on and finished: nothing to click any more. Or the failover lost
                # the step that posted this card, and the run, done again, asks on a new one.
                seen = card.ts
                with contextlib.suppress(AssertionError):
                    await self.slack.wait_for(
                        lambda seen=seen: self.ending(number) or self.card(number, besides=seen), 5
                    )
                if self.ending(number):
                    return True
                if (newer := self.card(number, besides=seen)) is not None:
                    card, (run_id, approval_id) = newer, ids_of(newer)
                    continue
            if text == TAKEN_BACK:
                continue
            if text not in RETRYABLE:
                self.tally.stuck[number] = f"click refused: {text}"
                return False
            self.tally.retries["click"] += 1
            await asyncio.sleep(RETRY_EVERY)
        return False

    async def play(self, number: int) -> None:
        await asyncio.sleep(number * START_EVERY)
        deadline = time.monotonic() + RUN_DEADLINE
        if not await self.start(number, deadline):
            return  # never acknowledged: nothing was promised
        with contextlib.suppress(AssertionError):
            await self.slack.wait_for(
                lambda: self.card(number) or self.ending(number),
                max(0.1, deadline - time.monotonic()),
            )
        card = self.card(number)
        if card is None:
            self.tally.stuck[number] = "no card (start lost?)"
            return
        await asyncio.sleep(THINK + (number % 3) * 0.3)  # a person takes a moment
        for _ in range(AGAIN_AT_MOST):
            if not await self.approve(number, card, deadline):
                self.tally.stuck.setdefault(number, "click never answered OK")
                return
            told = self.told_lost(number)
            with contextlib.suppress(AssertionError):
                await self.slack.wait_for(
                    lambda told=told: self.ending(number) or self.told_lost(number) > told,
                    max(0.1, deadline - time.monotonic()),
                )
            if self.ending(number):
                self.tally.finished.add(number)
                return
            if self.told_lost(number) == told:
                break
            # Told the approval was lost: the card asks again (or the run posts a new one).
            self.tally.told_lost.add(number)
            with contextlib.suppress(AssertionError):
                await self.slack.wait_for(lambda: self.card(number), 10, "a card to approve")
            card = self.card(number) or card
        self.tally.stuck[number] = "approved, never finished"

    async def again(self, number: int) -> None:
        """Told, after the run answered, that the approval was lost (the answer came from the
        old primary): approve the card that asks again, once more."""
        self.tally.told_lost.add(number)
        deadline = time.monotonic() + RUN_DEADLINE
        with contextlib.suppress(AssertionError):
            await self.slack.wait_for(lambda: self.card(number), 10, "the card asking again")
        card, answered = self.card(number), self.answers(number)
        if card is None or not await self.approve(number, card, deadline):
            return  # the run itself was lost (the card says so): nothing to approve
        with contextlib.suppress(AssertionError):
            await self.slack.wait_for(
                lambda: self.answers(number) > answered, max(0.1, deadline - time.monotonic())
            )


async def fault(redis: ReplicatedRedis, tally: Tally, began: float) -> dict[str, float]:
    """Hold the link until writes are in flight, kill the primary, wait for the failover,
    and bring the killed server back as a replica of the new one."""
    await asyncio.sleep(max(0.0, began + FAULT_AFTER - time.monotonic()))
    held_at = time.monotonic()
    redis.proxy.hold()
    deadline = held_at + HOLD_AT_MOST
    while tally.acked_since(held_at) < HOLD_UNTIL_ACKED and time.monotonic() < deadline:
        tally.acked.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tally.acked.wait(), deadline - time.monotonic())
    acked_while_held = tally.acked_since(held_at)
    held_bytes = redis.proxy.held
    redis.kill_primary()
    await redis.proxy.drop()
    failover = await redis.wait_for_failover()
    redis.restart_old_primary()
    rejoined = await redis.wait_for_replica()
    return {
        "held_s": round(time.monotonic() - held_at - failover - rejoined, 2),
        "held_bytes": held_bytes,
        "acked_while_held": acked_while_held,
        "failover_s": round(failover, 2),
        "rejoined_s": round(rejoined, 2),
    }


async def approvals_in_audit(primary: aioredis.Redis, deployment: Deployment) -> dict[str, float]:
    """`run_id:approval_id` -> when it was first approved, in the (new) primary's audit trail."""
    rows: Any = await primary.xrange(deployment.keys.audit)
    found: dict[str, float] = {}
    for _, fields in rows:
        if fields[b"event"] == b"approved":
            details = json.loads(fields[b"details"])
            key = f"{fields[b'run_id'].decode()}:{details['approval_id']}"
            found[key] = min(found.get(key, details["at"]), details["at"])
    return found


def lost_of(tally: Tally, in_audit: dict[str, float]) -> dict[int, str]:
    """Runs whose first acknowledged approval is not in the trail: missing, or there only as
    made again later (after the person was told it was lost)."""
    return {
        number: key
        for number, (key, acked_at) in tally.first_acked.items()
        if key not in in_audit or in_audit[key] > acked_at
    }


@pytest.mark.timeout(240)
@pytest.mark.parametrize("min_replicas", [1, 0], ids=["wait-for-1-replica", "no-wait"])
async def test_a_failover_loses_nothing_acknowledged(
    deployment: Deployment, tmp_path: Path, min_replicas: int
) -> None:
    redis = ReplicatedRedis(tmp_path / "redis")
    await redis.start()
    primary = redis.primary_client()
    try:
        env = {**redis.environ(min_replicas), **WORKER_ENV}
        deployment.model.script = script
        await deployment.web(**env)
        workers = [deployment.worker(f"worker.{n}", **env) for n in (1, 2)]
        for worker in workers:
            await wait_for_log(worker, "worker ready", timeout=60)
        tally = Tally()
        person = Person(deployment=deployment, tally=tally)
        began = time.monotonic()
        try:
            async with asyncio.TaskGroup() as group:
                faulted = group.create_task(fault(redis, tally, began))
                for number in range(RUNS):
                    group.create_task(person.play(number))
        except BaseException as error:
            error.add_note(f"{what_failed(error)}\n{deployment.logs_text()}\n{redis.logs()}")
            raise
        blow = faulted.result()
        # What the web found lost is said within moments of the new primary answering; people
        # told so after their run had answered (on the old primary) approve once more.
        await asyncio.sleep(SETTLE_SECONDS)
        late = [n for n in tally.first_acked if person.told_lost(n) and n not in tally.told_lost]
        async with asyncio.TaskGroup() as group:
            for number in late:
                group.create_task(person.again(number))

        in_audit = await approvals_in_audit(primary, deployment)
        acked = {key for key, _ in tally.first_acked.values()}
        lost = lost_of(tally, in_audit)
        silent = set(lost) - tally.told_lost
        false_alarms = tally.told_lost - set(lost)
        unfinished = set(tally.starts_acked) - tally.finished
        ledger: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
        ran = Counter(json.loads(entry)["call_id"] for entry in ledger)
        twice = {call: n for call, n in ran.items() if n > 1}
        print(
            f"\nfailover (REDIS_MIN_REPLICAS={min_replicas}): {blow}; "
            f"starts acknowledged={len(tally.starts_acked)}, "
            f"clicks acknowledged={len(acked)}, found on the new primary={len(acked) - len(lost)}, "
            f"acknowledged decisions lost={len(lost)} (said={len(set(lost) - silent)}, "
            f"silent={len(silent)}, said wrongly={len(false_alarms)}), "
            f"runs finished={len(tally.finished)}/{len(tally.starts_acked)}, "
            f"unfinished={ {n: tally.stuck.get(n, '?') for n in sorted(unfinished)} }, "
            f"retries={dict(tally.retries)}, tools run twice={twice}"
        )
        context = f"{blow}; logs in {deployment.logs}"
        assert blow["held_bytes"] > 0, f"no write was in flight at the kill ({context})"
        assert not twice, f"a tool ran twice: {twice} ({context})"
        assert not false_alarms, f"told of losses that did not happen: {false_alarms} ({context})"
        if min_replicas >= 1:
            assert tally.acked_since(0) > 0
            assert not lost, f"acknowledged decisions lost: {lost} ({context})"
            assert not unfinished, f"runs did not finish: {tally.stuck} ({context})"
            assert len(tally.starts_acked) == RUNS, f"some run never started ({context})"
        else:
            # What WAIT is for: acknowledged while the replica lagged, then gone with the primary.
            assert blow["acked_while_held"] > 0, f"nothing acknowledged while held ({context})"
            assert lost or unfinished, f"N=0 lost nothing this time ({context})"
            assert not silent, f"acknowledged decisions lost without a word: {silent} ({context})"
    finally:
        await primary.aclose()
        await redis.stop()
