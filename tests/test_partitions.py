"""Network partitions, the Jepsen way: what `REDIS_MIN_REPLICAS` buys, measured on real processes.

A primary, two replicas and three Sentinels, one per node namespace (`tests.lab_redis`); the web
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
partitions) against both. Lost: acknowledged, then missing from the trail, and the card still
shows the decision (a card whose buttons came back told the person). Doubled: a call run twice.
Unauthorized: a call run that nobody approved, or whose approval nobody was told of.

With `REDIS_MIN_REPLICAS=1` nothing may be lost, doubled or unauthorized. With 0 the same rounds
lose what the cut-off primary acknowledged; the test asserts that something was lost or doubled,
to show the setting's point, and that no call ran without an approval.

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

from bot.words import runs as messages
from tests.deployment import Deployment, what_failed
from tests.fake_openai import ModelRequest, Reply, message, tool_call
from tests.fake_slack import Message
from tests.lab_redis import NODES, LabRedis
from tests.namespaces import Lab, sweep, unavailable
from tests.processes import Process, wait_for_log
from tests.tcp_proxy import Faults

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
    """Run number -> (run id, approval id) of a click acknowledged to the person."""
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
        return any(self.slack.final_answers(root.ts) for root in self.roots(number))

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

    async def click(self, card: Message, user: str) -> str | None:
        """One click on Approve: the private answer (None: none, and the card was redrawn;
        "" nothing came: the web was away)."""
        seen = len(self.slack.calls)
        try:
            status, _ = await self.deployment.sender.click(card, "approve", user=user)
        except (aiohttp.ClientError, TimeoutError):
            return ""
        if status != 200:
            return ""

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
            return ""
        return text

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
        user = f"UAPPROVER{number:02d}"
        while time.monotonic() < deadline:
            card = self.slack.messages.get(card.ts, card)
            if "approve" not in card.action_ids():
                break  # decided after all (a "not confirmed" that counted): the card says so
            run_id, approval_id = ids_of(card)
            text = await self.click(card, user)
            if text is None:
                self.history.acked[number] = (run_id, approval_id)
                self.history.cards[number] = card.ts
                break
            if text == messages.APPROVAL_UNKNOWN:
                break
            self.history.retries["click"] += 1
            await asyncio.sleep(RETRY_EVERY)
        try:
            await self.slack.wait_for(
                lambda: self.ended(number), max(0.1, deadline - time.monotonic()), "an ending"
            )
        except AssertionError:
            self.history.unfinished[number] = "no ending"


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

    async def start_worker(self) -> None:
        self.worker = self.deployment.worker(
            "worker.1",
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
        self.history.kills[which] += 1
        await asyncio.sleep(1.0)
        await (self.start_web() if which == "web" else self.start_worker())

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


def audit_of(redis: LabRedis, node: str, stream: str) -> dict[str, str]:
    """`run_id:approval_id` -> its decision, in `node`'s audit trail."""
    client = redis.primary_client(node)
    try:
        rows: Any = client.xrange(stream)
    finally:
        client.close()
    found = {}
    for _, fields in rows:
        event = fields[b"event"].decode()
        details = json.loads(fields[b"details"])
        if event in ("approved", "rejected") and "approval_id" in details:
            found[f"{fields[b'run_id'].decode()}:{details['approval_id']}"] = event
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
    trail = await asyncio.to_thread(audit_of, lab_redis, primary, deployment.keys.audit)
    ledger: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    ran = Counter(json.loads(entry)["call_id"] for entry in ledger)

    acked = {n: f"{run}:{approval}" for n, (run, approval) in history.acked.items()}
    lost = {n: key for n, key in acked.items() if trail.get(key) != "approved"}
    silent = {
        n: key
        for n, key in lost.items()
        if "approve" not in deployment.slack.messages[history.cards[n]].action_ids()
    }
    doubled = {call: count for call, count in ran.items() if count > 1}
    numbers = {call: int(call.removeprefix("call_p")) for call in ran}
    unauthorized = {
        call
        for call, n in numbers.items()
        if undecided(n) or (n not in acked and trail.get(history.asked.get(n, "")) != "approved")
    }
    figures = {
        "seed": SEED,
        "partitions": history.partitions,
        "promotions": history.promotions,
        "kills": dict(history.kills),
        "starts acknowledged": len(history.starts),
        "clicks acknowledged": len(acked),
        "lost": len(lost),
        "lost silently": len(silent),
        "doubled": len(doubled),
        "unauthorized": len(unauthorized),
        "unfinished": history.unfinished,
        "retries": dict(history.retries),
        "worker proxy": lab_redis.worker_counts(),
    }
    print(f"\npartitions (REDIS_MIN_REPLICAS={min_replicas}): {figures}")
    context = f"{figures}; logs in {deployment.logs}"
    assert history.partitions == ROUNDS
    assert not unauthorized, f"tools ran without an approval: {unauthorized} ({context})"
    if min_replicas >= 1:
        assert not doubled, f"tools ran twice: {doubled} ({context})"
        assert not lost, f"acknowledged decisions lost: {lost} ({context})"
        assert acked, f"no click was acknowledged ({context})"
    else:
        # What WAIT is for: acknowledged by the cut-off primary, gone when it rejoined.
        assert lost or doubled, f"REDIS_MIN_REPLICAS=0 lost nothing this time ({context})"
