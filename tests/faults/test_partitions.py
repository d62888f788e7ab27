"""Network partitions, the Jepsen way: what `REDIS_MIN_REPLICAS` buys, measured on real processes.

A primary, two replicas and three Sentinels, one per node namespace (`tests.support.lab_redis`);
the web
process in an `app` namespace and the worker behind the test's proxy, whose traffic leaves from
`app`. Each round people start runs and approve their cards (a quarter of the cards nobody
decides) while:
- the primary's node and `app` are partitioned from the two other nodes, the Sentinel majority,
  for longer than Sentinel takes to promote a replica; then the partition heals and the old
  primary rejoins as a replica;
- the proxy between the worker and Redis adds latency, reordering, lost segments and resets, and
  after the heal stalls for two seconds;
- the web and the worker are each SIGKILLed once and started again.

The history is then checked: every click acknowledged to a person (the card redrawn, no "try
again") against the final primary's audit trail, and the tools' own log (the ledger, outside the
partitions) against both. Lost: acknowledged, then missing from the trail (or there only as made
again later). Said: the person who clicked was told privately that it was lost, and the card
came back with its buttons and a line naming whose decision was lost (or, its call gone too,
said it no longer counts); such a person approves again. Nobody can say a loss when the web
process that acknowledged it was SIGKILLed, and the next one started only once the cut-off
primary had been turned into a replica (its data replaced): those are counted apart
(`docs/operations.md` says so). Doubled: a call run
twice, unless the worker that ran it first was killed before the new primary was reachable (its
output then died with it). Unauthorized: a call run that nobody approved, or whose approval
nobody was told of.

With `REDIS_MIN_REPLICAS=1` nothing may be lost, doubled or unauthorized. With 0 the same rounds
lose what the cut-off primary acknowledged; the test asserts that something was lost (to show
the setting's point), that every loss was said and nothing else was, that no call ran twice
where the worker that ran it lived on, and that no call ran without an approval.

`PARTITION_ROUNDS` sets the rounds (1 by default: about three minutes for both settings; the
long profile, e.g. 10, repeats partition and heal against whichever node is primary) and
`PARTITION_SEED` the seed; each parametrization prints its figures (`-s`), which
`docs/operations.md` quotes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.words import failovers as lost_words
from bot.words import runs as messages
from tests.support.deployment import Deployment, what_failed
from tests.support.fake_openai import ModelRequest, Reply, message, tool_call
from tests.support.fake_slack import Message
from tests.support.lab_redis import NODES, LabRedis
from tests.support.namespaces import Lab, sweep, unavailable
from tests.support.processes import Process, wait_for_log
from tests.support.tcp_proxy import Faults

pytestmark = pytest.mark.chaos

ROUNDS = int(os.environ.get("PARTITION_ROUNDS", "1"))
SEED = int(os.environ.get("PARTITION_SEED", str(random.randrange(1_000_000))))
RUNS_PER_ROUND = 4
START_EVERY = 0.3
PARTITION_AFTER = 2.5
PARTITION_SECONDS = 8.0
"""Longer than Sentinel's `DOWN_AFTER_MS` and an election: a replica is promoted meanwhile."""
STALL_SECONDS = 2.0
ROUND_DEADLINE = 75.0
RETRY_EVERY = 0.5
NOISY = Faults(latency=0.01, jitter=0.04, loss=0.02, retransmit=0.2, reset=0.002)
WORKER_ENV = {"JOB_MAX_DELIVERIES": "20", "REMINDER_AT": "0", "JOB_IDLE_TIMEOUT_SECONDS": "3"}
RETRYABLE = (messages.NOT_CONFIRMED, messages.TRY_AGAIN)
LOST_NOTES = {
    lost_words.lost_note("restart_service", "approved"),
    lost_words.void_note("restart_service", "approved"),
}
"""What a person whose approval a failover lost is told."""
AGAIN_AT_MOST = 3
SETTLE_SECONDS = 3.0
"""After the rounds: time for the web to say the last losses it found (it looks every second)."""


def task_of(number: int) -> str:
    return f"partition run {number}"


def script(request: ModelRequest) -> Reply:
    number = int(request.task.rsplit(" ", 1)[1])
    call_id = f"call_p{number}"
    if call_id not in request.tool_outputs:
        return [tool_call("restart_service", {"service": f"svc{number}"}, call_id)]
    return [message(f"{task_of(number)} done: {request.tool_outputs[call_id]}")]


def undecided(number: int) -> bool:
    """Nobody decides these cards: their tools must never run."""
    return number % 4 == 3


@dataclass(kw_only=True)
class History:
    acked: dict[int, tuple[str, str]] = field(default_factory=dict)
    """Run number -> (run id, approval id) of the first click acknowledged to the person."""
    acked_at: dict[int, float] = field(default_factory=dict)
    """Run number -> the wall time of that acknowledgement."""
    asked: dict[int, str] = field(default_factory=dict)
    """Run number -> `run_id:approval_id` its card asks about."""
    cards: dict[int, str] = field(default_factory=dict)
    """Run number -> the ts of the card clicked (what the person looks at)."""
    retries: Counter[str] = field(default_factory=Counter)
    starts: set[int] = field(default_factory=set)
    unfinished: dict[int, str] = field(default_factory=dict)
    partitions: int = 0
    promotions: list[str] = field(default_factory=list)
    kills: Counter[str] = field(default_factory=Counter)
    approved_again: set[int] = field(default_factory=set)
    """Runs whose clicker, told the approval was lost, approved again."""
    healed_at: list[float] = field(default_factory=list)
    """The wall time of each heal."""
    demoted_at: list[float] = field(default_factory=list)
    """When each cut-off primary was turned into a replica (its data replaced), after a heal."""
    workers_killed: dict[str, float] = field(default_factory=dict)
    """Each worker (its `DYNO`) SIGKILLed, and when."""
    webs: list[list[float]] = field(default_factory=list)
    """Each web process: [when it answered, when it was SIGKILLed (if it was)]."""

    def heal_after(self, moment: float) -> float:
        return next((h for h in self.healed_at if h > moment), float("inf"))

    def unknowable(self, acked_at: float) -> bool:
        """An approval acknowledged by a web process SIGKILLed before the cut-off primary was
        turned into a replica, and whose successor started only after: neither remembers it,
        the old primary no longer holds it, and the new one never had it."""
        demoted = next((d for d in self.demoted_at if d > acked_at), float("inf"))
        for this, following in zip(self.webs, self.webs[1:], strict=False):
            if this[0] <= acked_at and len(this) > 1 and acked_at < this[1]:
                return this[1] < demoted < following[0]
        return False

    def output_died(self, execution: dict[str, Any]) -> bool:
        """A call's first run whose worker was SIGKILLed before the heal that followed it: its
        output died with it, and nothing was left to write back."""
        killed = self.workers_killed.get(str(execution.get("dyno", "")))
        return killed is not None and killed < self.heal_after(float(execution["at"]))


def ids_of(card: Message) -> tuple[str, str]:
    value = next(a["value"] for a in card.actions() if a["action_id"] == "approve")
    run_id, approval_id = str(value).split(":")[:2]
    return run_id, approval_id


@dataclass(kw_only=True)
class People:
    deployment: Deployment
    history: History

    @property
    def slack(self) -> Any:
        return self.deployment.slack

    def roots(self, number: int) -> list[Message]:
        return [m for m in self.slack.roots() if m.text.endswith(f"*ops*: {task_of(number)}")]

    def card(self, number: int) -> Message | None:
        threads = {root.ts for root in self.roots(number)}
        found = [c for c in self.slack.cards() if c.thread_ts in threads]
        return found[0] if found else None

    def ended(self, number: int) -> bool:
        return self.answers(number) > 0

    def answers(self, number: int) -> int:
        return sum(len(self.slack.final_answers(root.ts)) for root in self.roots(number))

    def told_lost(self, number: int) -> int:
        """How often the run's clicker was told privately that their approval was lost."""
        user = f"UAPPROVER{number:02d}"
        return sum(e["user"] == user and e["text"] in LOST_NOTES for e in self.slack.ephemerals)

    def came_back(self, number: int) -> bool:
        """The card clicked was drawn again saying whose approval was lost."""
        user, ts = f"UAPPROVER{number:02d}", self.history.cards.get(number)
        lines = (lost_words.lost_line(user, "approved"), lost_words.void_line(user, "approved"))
        return any(
            c.method == "chat.update"
            and c.args.get("ts") == ts
            and any(line in json.dumps(c.args.get("blocks")) for line in lines)
            for c in self.slack.calls
        )

    async def start(self, number: int, deadline: float) -> bool:
        trigger = f"trigger-partition-{number}-{time.time_ns()}"
        while time.monotonic() < deadline:
            try:
                status, body = await self.deployment.sender.command(
                    task_of(number), trigger_id=trigger
                )
            except (aiohttp.ClientError, TimeoutError):
                status, body = 0, {}
            if status == 200 and body.get("text") == messages.command_starting("ops"):
                self.history.starts.add(number)
                return True
            self.history.retries["start"] += 1
            await asyncio.sleep(RETRY_EVERY)
        return False

    async def click(self, card: Message, user: str) -> tuple[str | None, float]:
        """One click on Approve: the private answer (None: none, and the card was redrawn;
        "" nothing came: the web was away), and when the web answered (the wall clock)."""
        seen = len(self.slack.calls)
        try:
            status, _ = await self.deployment.sender.click(card, "approve", user=user)
        except (aiohttp.ClientError, TimeoutError):
            return "", 0.0
        if status != 200:
            return "", 0.0
        answered = time.time()

        def said() -> str | None:
            for call in self.slack.calls[seen:]:
                if call.method == "chat.postEphemeral" and call.args.get("user") == user:
                    return str(call.args.get("text", ""))
            return None

        def redrawn() -> bool:
            return any(
                c.method == "chat.update" and c.args.get("ts") == card.ts
                for c in self.slack.calls[seen:]
            )

        with contextlib.suppress(AssertionError):
            await self.slack.wait_for(lambda: said() is not None or redrawn(), 15, "an answer")
        if said() is None and redrawn():
            await asyncio.sleep(0.3)  # a "try again" follows a worker's redraw within moments
        text = said()
        if text is None and not redrawn():
            return "", answered
        return text, answered

    async def play(self, number: int, delay: float, deadline: float) -> None:
        await asyncio.sleep(delay)
        if not await self.start(number, deadline):
            return  # never acknowledged: nothing was promised
        try:
            card: Message = await self.slack.wait_for(
                lambda: self.card(number), max(0.1, deadline - time.monotonic()), "a card"
            )
        except AssertionError:
            self.history.unfinished[number] = "no card"
            return
        self.history.asked[number] = ":".join(ids_of(card))
        if undecided(number):
            return
        await asyncio.sleep(1.0 + (number % 3) * 0.8)  # a person reads the card
        for _ in range(AGAIN_AT_MOST):
            await self.approve(number, card, deadline)
            told = self.told_lost(number)
            with contextlib.suppress(AssertionError):
                await self.slack.wait_for(
                    lambda told=told: self.ended(number) or self.told_lost(number) > told,
                    max(0.1, deadline - time.monotonic()),
                    "an ending",
                )
            if self.ended(number):
                return
            if self.told_lost(number) == told:
                break
            # Told the approval was lost: the card asks again (or the run posts a new one).
            self.history.approved_again.add(number)
            with contextlib.suppress(AssertionError):
                await self.slack.wait_for(lambda: self.card(number), 10, "a card to approve")
            card = self.card(number) or card
        self.history.unfinished[number] = "no ending"

    async def approve(self, number: int, card: Message, deadline: float) -> None:
        """Click Approve until it is answered OK (or the card no longer asks)."""
        user = f"UAPPROVER{number:02d}"
        while time.monotonic() < deadline:
            card = self.slack.messages.get(card.ts, card)
            if "approve" not in card.action_ids():
                return  # decided after all (a "not confirmed" that counted): the card says so
            run_id, approval_id = ids_of(card)
            text, answered = await self.click(card, user)
            if text is None:
                if number not in self.history.acked:
                    self.history.acked[number] = (run_id, approval_id)
                    self.history.acked_at[number] = answered
                    self.history.cards[number] = card.ts
                return
            if text == messages.APPROVAL_UNKNOWN:
                return
            self.history.retries["click"] += 1
            await asyncio.sleep(RETRY_EVERY)

    async def again(self, number: int) -> None:
        """Told, after the run answered (from the primary cut off), that the approval was
        lost: approve the card that asks again, once more."""
        self.history.approved_again.add(number)
        deadline = time.monotonic() + ROUND_DEADLINE
        with contextlib.suppress(AssertionError):
            await self.slack.wait_for(lambda: self.card(number), 10, "the card asking again")
        card, answered = self.card(number), self.answers(number)
        if card is None:
            return  # the run itself was lost (the card says so): nothing to approve
        await self.approve(number, card, deadline)
        with contextlib.suppress(AssertionError):
            await self.slack.wait_for(
                lambda: self.answers(number) > answered, ROUND_DEADLINE, "a new ending"
            )


@dataclass(kw_only=True)
class Nemesis:
    lab: Lab
    redis: LabRedis
    deployment: Deployment
    history: History
    rng: random.Random
    env: dict[str, str]
    web: Process | None = None
    worker: Process | None = None

    async def start_web(self) -> None:
        self.web = await self.deployment.web(netns=self.redis.app.name, **self.env)
        self.history.webs.append([time.time()])

    async def start_worker(self) -> None:
        # A dyno name per incarnation: the ledger says which one ran each call.
        self.worker = self.deployment.worker(
            f"worker.{self.history.kills['worker'] + 1}",
            name=f"worker-{self.history.kills['worker']}",
            netns=self.redis.worker_side.name,
            **self.env,
        )
        await wait_for_log(self.worker, "worker ready", timeout=60)

    async def kill(self, which: str, at: float) -> None:
        await asyncio.sleep(at)
        process = self.web if which == "web" else self.worker
        if process is not None:
            process.stop()
        if which == "worker":
            self.history.workers_killed[f"worker.{self.history.kills['worker'] + 1}"] = time.time()
        else:
            self.history.webs[-1].append(time.time())
        self.history.kills[which] += 1
        await asyncio.sleep(1.0)
        await (self.start_web() if which == "web" else self.start_worker())

    async def demoted(self, node: str) -> None:
        """Note when `node`, the primary cut off, replicates from the new one."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (await asyncio.to_thread(self.redis.info, node)).get("role") == "slave":
                self.history.demoted_at.append(time.time())
                return
            await asyncio.sleep(0.2)

    async def round(self) -> None:
        primary = await asyncio.to_thread(self.redis.named_primary) or "n1"
        others = [node for node in NODES if node != primary]
        self.redis.set_worker_faults(NOISY)
        async with asyncio.TaskGroup() as group:
            group.create_task(self.kill("web", self.rng.uniform(1.0, 9.0)))
            group.create_task(self.kill("worker", self.rng.uniform(1.0, 9.0)))
            await asyncio.sleep(PARTITION_AFTER)
            self.lab.partition([primary, "app"], others)
            self.history.partitions += 1
            promoted = await self.redis.wait_promoted(primary, timeout=PARTITION_SECONDS + 20)
            await asyncio.sleep(max(0.0, PARTITION_SECONDS - 4))
            self.lab.heal()
            self.history.healed_at.append(time.time())
            group.create_task(self.demoted(primary))
            self.history.promotions.append(f"{primary}->{promoted}")
        self.redis.stall_worker(True)
        await asyncio.sleep(STALL_SECONDS)
        self.redis.stall_worker(False)
        await self.redis.wait_settled(timeout=60)
        self.redis.set_worker_faults(Faults())


@pytest.fixture
def lab() -> Iterator[Lab]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    sweep()
    made = Lab("part")
    try:
        yield made
    finally:
        made.remove()


@pytest.fixture
async def lab_redis(lab: Lab, tmp_path: Path, deployment: Deployment) -> AsyncIterator[LabRedis]:
    servers = LabRedis(lab, tmp_path / "redis", rng=random.Random(SEED))
    try:
        loopback = [
            _port(deployment.slack.url),
            _port(deployment.model.url),
            _port(deployment.redis_url),
        ]
        await servers.start(loopback)
        await servers.expose(servers.app, deployment.port)
        yield servers
    finally:
        for process in deployment.processes:
            process.stop()
        await servers.stop()


def _port(url: str) -> int:
    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def audit_of(redis: LabRedis, node: str, stream: str) -> dict[str, tuple[str, float]]:
    """`run_id:approval_id` -> its first decision and when, in `node`'s audit trail."""
    client = redis.primary_client(node)
    try:
        rows: Any = client.xrange(stream)
    finally:
        client.close()
    found: dict[str, tuple[str, float]] = {}
    for _, fields in rows:
        event = fields[b"event"].decode()
        details = json.loads(fields[b"details"])
        if event in ("approved", "rejected") and "approval_id" in details:
            found.setdefault(
                f"{fields[b'run_id'].decode()}:{details['approval_id']}", (event, details["at"])
            )
    return found


@pytest.mark.timeout(900)
@pytest.mark.parametrize("min_replicas", [1, 0], ids=["wait-for-1-replica", "no-wait"])
async def test_partitions_lose_nothing_acknowledged(
    lab: Lab, lab_redis: LabRedis, deployment: Deployment, min_replicas: int
) -> None:
    rng = random.Random(SEED)
    env = {**lab_redis.environ(min_replicas), **WORKER_ENV}
    deployment.model.script = script
    history = History()
    people = People(deployment=deployment, history=history)
    nemesis = Nemesis(
        lab=lab, redis=lab_redis, deployment=deployment, history=history, rng=rng, env=env
    )
    await nemesis.start_web()
    await nemesis.start_worker()
    try:
        for round_number in range(ROUNDS):
            deadline = time.monotonic() + ROUND_DEADLINE
            first = round_number * RUNS_PER_ROUND
            async with asyncio.TaskGroup() as group:
                group.create_task(nemesis.round())
                for index in range(RUNS_PER_ROUND):
                    group.create_task(people.play(first + index, index * START_EVERY, deadline))
    except BaseException as error:
        error.add_note(f"{what_failed(error)}\n{deployment.logs_text()}\n{lab_redis.logs()}")
        raise
    primary, _ = await lab_redis.wait_settled()
    # What the web found lost is said within moments; people told so after their run had
    # answered (from the cut-off primary) approve once more.
    await asyncio.sleep(SETTLE_SECONDS)
    late = [n for n in history.acked if people.told_lost(n) and n not in history.approved_again]
    async with asyncio.TaskGroup() as group:
        for number in late:
            group.create_task(people.again(number))
    trail = await asyncio.to_thread(audit_of, lab_redis, primary, deployment.keys.audit)
    ledger: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    executions: dict[str, list[dict[str, Any]]] = {}
    for entry in ledger:
        execution = json.loads(entry)
        executions.setdefault(execution["call_id"], []).append(execution)

    def approved(key: str) -> float | None:
        """When the call was first approved, by the final primary's trail."""
        event, at = trail.get(key, ("", 0.0))
        return at if event == "approved" else None

    acked = {n: f"{run}:{approval}" for n, (run, approval) in history.acked.items()}
    # Lost: not approved there, or only later (made again, after the person was told).
    lost = {
        n: key
        for n, key in acked.items()
        if (at := approved(key)) is None or at > history.acked_at[n]
    }
    told = {n for n in acked if people.told_lost(n)}
    said = {n for n in told if people.came_back(n)}  # the clicker told, and the card too
    unknowable = {n for n in lost if history.unknowable(history.acked_at[n])}
    silent = {n: key for n, key in lost.items() if n not in said and n not in unknowable}
    said_wrongly = told - set(lost)
    doubled = {call: len(runs) for call, runs in executions.items() if len(runs) > 1}
    unexcused = {c: n for c, n in doubled.items() if not history.output_died(executions[c][0])}
    numbers = {call: int(call.removeprefix("call_p")) for call in executions}
    unauthorized = {
        call
        for call, n in numbers.items()
        if undecided(n) or (n not in acked and approved(history.asked.get(n, "")) is None)
    }
    figures = {
        "seed": SEED,
        "partitions": history.partitions,
        "promotions": history.promotions,
        "kills": dict(history.kills),
        "starts acknowledged": len(history.starts),
        "clicks acknowledged": len(acked),
        "lost": len(lost),
        "lost and said": len(said & set(lost)),
        "lost, nobody left who knew": len(unknowable - said),
        "lost silently": len(silent),
        "said wrongly": len(said_wrongly),
        "doubled": len(doubled),
        "doubled, worker alive": len(unexcused),
        "unauthorized": len(unauthorized),
        "unfinished": history.unfinished,
        "retries": dict(history.retries),
        "worker proxy": lab_redis.worker_counts(),
    }
    print(f"\npartitions (REDIS_MIN_REPLICAS={min_replicas}): {figures}")
    context = f"{figures}; logs in {deployment.logs}"
    assert history.partitions == ROUNDS
    assert not unauthorized, f"tools ran without an approval: {unauthorized} ({context})"
    assert not said_wrongly, f"told of losses that did not happen: {said_wrongly} ({context})"
    if min_replicas >= 1:
        assert not doubled, f"tools ran twice: {doubled} ({context})"
        assert not lost, f"acknowledged decisions lost: {lost} ({context})"
        assert acked, f"no click was acknowledged ({context})"
    else:
        # What WAIT is for: acknowledged by the cut-off primary, gone when it rejoined; and
        # what the runtime does about it: each loss said, no tool run twice that it could save.
        assert lost or doubled, f"REDIS_MIN_REPLICAS=0 lost nothing this time ({context})"
        assert not silent, f"acknowledged decisions lost without a word: {silent} ({context})"
        assert not unexcused, f"tools ran twice, their worker alive: {unexcused} ({context})"
