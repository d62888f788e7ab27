"""Decisions acknowledged to people, looked for again after a failover; the lost ones are said.

With `REDIS_MIN_REPLICAS=0` a click answered "Approved by …" can be lost with the primary that
recorded it (`runtime.failover.recent`). The web process remembers each decision it
acknowledged (`note`: no Redis command, nothing on the click's path), and a web started after
the one that acknowledged it reads the last ones from the audit trail (`seed`). Once the primary
changes, each decision the replication ids do not prove carried over is looked up on the new
primary, in one round trip that also says which server answered:
- decided there (by anyone), counted there towards a quorum, the run gone on to a later round
  or ended (its tombstone): nothing was lost that a card still shows wrongly;
- the call waits there undecided: the decision is lost. Its card is drawn again from the new
  primary's record, with its buttons and a line saying whose decision was lost, and the person
  is told privately (`LostDecisionReport`);
- the run is there at an earlier round (the card's was lost too), or not at all and without a
  tombstone (its start was lost): the card is marked as no longer counting, and the person
  told.
Several web processes may find the same loss: a `SET NX` on the new primary lets one of them say
it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

import redis.asyncio as aioredis

from runtime.audit.events import AuditEvent
from runtime.db.keys import Keys
from runtime.failover.identity import Primary
from runtime.failover.recent import Recent, Written
from runtime.failover.stale import stale_primaries
from runtime.record.envelope import PendingCall
from runtime.record.reads import AfterFailover
from runtime.record.view import of_queued, queue
from runtime.reporter import RunView

log = logging.getLogger(__name__)

REMEMBER_SECONDS = 900.0
"""How long a decision is looked for after it was acknowledged: longer than a partition is
likely to last before Sentinel's side and the cut-off primary meet again."""
MOST = 10_000
"""Decisions remembered at most (a few hundred bytes each)."""
TOLD_SECONDS = 86_400
"""How long the mark that one web process said a loss keeps the others from saying it too."""
DECIDED = (
    AuditEvent.APPROVED,
    AuditEvent.APPROVED_ALWAYS,
    AuditEvent.REJECTED,
    AuditEvent.ANSWERED,
)


@dataclass(kw_only=True, slots=True)
class Acknowledged(Written):
    """One decision (or approval towards a quorum) a person was told was recorded."""

    run_id: str
    approval_id: str
    user_id: str
    outcome: str
    tool: str = ""
    decided_at: float
    """Redis's time of the decision, as the decision script stamped it."""
    round: int = 0
    """The run's round the call was asked in (0: not known, for one read from the trail)."""
    where: str
    """Where the person decided: a channel (the card's, a copy's) or `HOME_TAB`."""
    card_ts: str | None = None
    """The card's message, where known."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LostDecision:
    decision: Acknowledged
    run: RunView | None
    """The run as the new primary has it; None when it is not there at all."""
    call: PendingCall | None
    """The call waiting again, to draw with its buttons (its gate applied, its card's ts);
    None when it no longer waits there (the run's round, or the run, was lost)."""


class LostDecisionReport(Protocol):
    """How people hear of a lost decision (`bot.reporting.failovers`)."""

    async def decision_lost(self, lost: LostDecision) -> None: ...


class AcknowledgedDecisions(Recent[tuple[str, str, str], Acknowledged]):
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        report: LostDecisionReport,
        *,
        seeds: bool = True,
        seconds: float = REMEMBER_SECONDS,
        most: int = MOST,
    ) -> None:
        """`seeds`: read recent decisions from the audit trail at start (`seed`). Only with
        `REDIS_MIN_REPLICAS=0`: otherwise the trail also holds decisions the replicas never
        confirmed, whose clickers were told to click again, not that they were recorded."""
        super().__init__(seconds=seconds, most=most)
        self._redis = redis
        self._keys = keys
        self._report = report
        self._seeds = seeds

    def note(
        self,
        *,
        run_id: str,
        approval_id: str,
        user_id: str,
        outcome: str,
        tool: str,
        decided_at: float,
        round_: int,
        where: str,
        card_ts: str | None,
    ) -> None:
        """A decision was just acknowledged to `user_id` (in memory only)."""
        entry = Acknowledged(
            noted=time.monotonic(),
            run_id=run_id,
            approval_id=approval_id,
            user_id=user_id,
            outcome=outcome,
            tool=tool,
            decided_at=decided_at,
            round=round_,
            where=where,
            card_ts=card_ts,
        )
        self.remember((run_id, approval_id, user_id), entry)

    async def seed(self, redis: aioredis.Redis) -> None:
        """Remember the decisions of the last `seconds` that the audit trail holds (those of an
        earlier web process too), as on the primary read now; and those of an old primary that
        Sentinel has not turned into a replica yet (`runtime.failover.stale`)."""
        if not self._seeds:
            return
        current = await self._seed_from(redis)
        async with stale_primaries(redis, current) as stale:
            for client, _ in stale:
                await self._seed_from(client)

    async def _seed_from(self, redis: aioredis.Redis) -> Primary:
        seconds, micros = await redis.time()
        now, monotonic = seconds + micros / 1e6, time.monotonic()
        since = f"{int((now - self.seconds) * 1000)}-0"  # an entry's id is its time in ms
        async with redis.pipeline(transaction=False) as pipe:
            pipe.info("replication")
            pipe.xrevrange(self._keys.audit, min=since, count=self.most)
            info, rows = await pipe.execute()
        primary = Primary.of(info)
        seeded = 0
        for _, fields in reversed(rows):
            entry = _acknowledged(fields, now=now, monotonic=monotonic, seconds=self.seconds)
            key = (entry.run_id, entry.approval_id, entry.user_id) if entry else None
            if entry is not None and key is not None and key not in self.entries:
                entry.seen_on, entry.offset = primary.replid, primary.offset
                self.remember(key, entry)
                seeded += 1
        if seeded:
            log.info(
                "watching %d decision(s) of the last %g s in case of a failover",
                seeded,
                self.seconds,
            )
        return primary

    async def look(
        self, key: tuple[str, str, str], entry: Acknowledged, primary: Primary
    ) -> int | None:
        run_id, approval_id = entry.run_id, entry.approval_id
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.info("replication")
            queue(pipe, self._keys, AfterFailover, run_id, approval_id)
            pipe.exists(self._keys.tombstone(run_id))
            info, reply, ended = await pipe.execute()
        there = Primary.of(info)
        if there.replid != primary.replid or not there.is_primary:
            return None  # another server answered: looked up again next tick
        call = of_queued(AfterFailover, run_id, reply, approval_id)
        if _kept(call, entry, ended=bool(ended)):
            return there.offset
        self.forget(key)
        log.warning(
            "run %s: the %s of %s by %s was lost in a Redis failover; saying so",
            run_id,
            entry.outcome,
            approval_id,
            entry.user_id,
        )
        if await self._first_to_say(entry):
            await self._report.decision_lost(_lost(call, entry))
        return None

    async def _first_to_say(self, entry: Acknowledged) -> bool:
        """Whether this process is the one to say the loss (the others found it too)."""
        about = f"lost:{entry.run_id}:{entry.approval_id}:{entry.user_id}:{entry.decided_at!r}"
        return bool(await self._redis.set(self._keys.notice(about), "1", nx=True, ex=TOLD_SECONDS))


def _kept(call: AfterFailover, entry: Acknowledged, *, ended: bool) -> bool:
    """Whether the new primary has the decision, or nothing there waits on it any more."""
    if not call.exists:
        return ended  # a run that ended left its tombstone; one never written has none
    if call.decided or any(a.user_id == entry.user_id for a in call.approvals or ()):
        return True
    envelope, round_ = call.envelope, call.round or 0
    if envelope is None:
        return True  # another version's record: its own web processes say what they can
    if envelope.call(entry.approval_id) is None:
        # Not in the run's current round: gone on past it (kept), or not yet there (lost).
        return round_ > 0 and (entry.round == 0 or round_ > entry.round)
    return call.status != "waiting"


def _lost(call: AfterFailover, entry: Acknowledged) -> LostDecision:
    envelope = call.envelope
    if envelope is None:
        return LostDecision(decision=entry, run=None, call=None)
    run = RunView.of(envelope)
    found = envelope.call(entry.approval_id)
    if found is None:
        return LostDecision(decision=entry, run=run, call=None)
    shown = call.gate.applied_to(found) if call.gate is not None else found
    waiting = shown.model_copy(
        update={
            "message_ts": call.message_ts or entry.card_ts,
            "approvals": call.approvals or (),
            "copies": call.copies or (),
            "edit": call.edit,
        }
    )
    return LostDecision(decision=entry, run=run, call=waiting)


def _acknowledged(
    fields: dict[Any, Any], *, now: float, monotonic: float, seconds: float
) -> Acknowledged | None:
    """A person's decision in the audit trail, within the last `seconds`; else None."""
    event = _text(fields.get(b"event"))
    if event not in DECIDED:
        return None
    try:
        details = json.loads(fields.get(b"details") or b"{}")
        at = float(details["at"])
        user_id, approval_id = str(details["user_id"]), str(details["approval_id"])
    except (KeyError, TypeError, ValueError):
        return None
    age = now - at
    if age > seconds:
        return None
    return Acknowledged(
        noted=monotonic - max(0.0, age),
        run_id=_text(fields.get(b"run_id")),
        approval_id=approval_id,
        user_id=user_id,
        outcome=event,
        tool=str(details.get("tool") or ""),
        decided_at=at,
        where=str(details.get("channel") or ""),
    )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")
