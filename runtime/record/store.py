"""The worker's view of runs: create, claim, stop for approvals, finish."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal, cast

import redis.asyncio as aioredis

from runtime.audit.events import AuditEvent
from runtime.db.clock import RedisClock
from runtime.db.keys import Keys
from runtime.db.lua import Registered
from runtime.db.replication import NO_REPLICAS, PrimaryChanged, Replication
from runtime.jobs.contracts import Conversation
from runtime.jobs.due_set import WAKE_STREAM_LENGTH, longest_sleep
from runtime.record import layout as rr
from runtime.record import scripts as rs
from runtime.record.call_memory import FORGETFUL, CallMemory
from runtime.record.envelope import (
    PendingCall,
    RunEnvelope,
    UnreadableEnvelope,
    dump_envelope,
)
from runtime.record.layout import CallGate
from runtime.record.leases import Claim, ClaimStatus, Fenced, Lease, claimed_hash
from runtime.record.once import ONCE_SECONDS
from runtime.record.reads import JournalRead, Place, StopRead, Whole
from runtime.record.run_record import Created, RunRecord, record_of, status_fields
from runtime.record.starts import CallStarts
from runtime.record.stop_mark import StopMark, Stopped
from runtime.record.turns import TurnJournal
from runtime.record.view import read, read_whole


class RunStore:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        replication: Replication = NO_REPLICAS,
        recent: CallMemory | None = None,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._replication = replication
        self._clock = RedisClock()
        self._create = Registered(redis, rs.CREATE)
        self._claim = rs.run_once(redis, rs.CLAIM)
        self._fenced_set = rs.run_once(redis, rs.FENCED_SET)
        self._fenced_write = rs.run_once(redis, rs.FENCED_WRITE, keeps=False)
        self._wait = rs.run_once(redis, rs.WAIT)
        self._close = rs.run_once(redis, rs.CLOSE)
        self._journal_put = Registered(redis, rs.JOURNAL_PUT)
        self.starts = CallStarts(redis, keys)
        self.turns = TurnJournal(redis, keys)
        self.recent = recent or FORGETFUL
        """The tool calls of this worker that a failover could lose (`runtime.failover`)."""

    async def _set(
        self, run_id: str, fields: dict[str, str], lease: Lease | None, audit: str = ""
    ) -> None:
        """`audit`: an entry (`AuditTrail.entry`) appended with the write, if it is made."""
        call = rs.FencedSet(
            run=self._keys.run(run_id),
            audit=self._keys.shard_of(run_id).audit,
            fence=str(lease.fence) if lease else "",
            entry=audit,
            fields=[p for pair in fields.items() for p in pair],
        )
        # Only a write with an audit entry needs the frame that makes it take effect once.
        written = await (self._fenced_set(call) if audit else self._fenced_write(call))
        if int(written) == -1:
            raise Fenced(run_id)

    async def create(self, envelope: RunEnvelope) -> Created | None:
        """Record a new run, taken by this delivery of its start job; or, for a run already
        recorded under this id, the run as stored, to be claimed (`claim`). None when a run of
        this id already ended (a redelivered start job)."""
        conversation = envelope.conversation
        fence = rr.fence_step()
        fields = {
            rr.ENVELOPE: dump_envelope(envelope),
            rr.STATUS: "running",
            rr.ROUND: "0",
            # Held by this delivery from the start: a new run needs no claim of its own.
            rr.FENCE: str(fence),
            # Plain copies outside the versioned envelope: enough to reach the thread even
            # when a later deploy cannot read the envelope any more.
            rr.CHANNEL: conversation.channel,
            rr.REQUESTER: conversation.requester,
            rr.REPLY_URL: conversation.reply_url or "",
        }
        reply: Any = await self._create(
            rs.Create(
                run=self._keys.run(envelope.run_id),
                tombstone=self._keys.tombstone(envelope.run_id),
                live_runs=self._keys.shard_of(envelope.run_id).live_runs,
                ttl_seconds=rr.RUNNING_TTL_SECONDS,
                run_id=envelope.run_id,
                fields=[p for pair in fields.items() for p in pair],
            )
        )
        if isinstance(reply, list):
            self._clock.saw(reply[1], reply[2])
            lease = Lease(run_id=envelope.run_id, fence=fence)
            return Created(record=RunRecord.new(envelope), lease=lease)
        if _text(reply) == "finished":
            return None
        stored = await self.load(envelope.run_id)
        if stored is None:
            return None
        # Read before this delivery's claim: an earlier delivery may journal meanwhile.
        return Created(record=replace(stored, journal=None, turns=None), lease=None)

    async def claim(self, run_id: str, *, kind: Literal["start", "resume"], round_: int) -> Claim:
        """Take the run for this delivery of its job (see `runtime.record.layout`)."""
        reply = await self._claim(
            rs.Claim(
                run=self._keys.run(run_id),
                audit=self._keys.shard_of(run_id).audit,
                kind=kind,
                round=round_,
                ttl_seconds=rr.RUNNING_TTL_SECONDS,
                run_id=run_id,
                event=AuditEvent.RESUMED,
                fence_step=rr.fence_step(),
            )
        )
        status = cast(ClaimStatus, _text(reply[0]))
        if len(reply) > 3:
            self._clock.saw(reply[2], reply[3])
        if len(reply) > 1:
            lease = Lease(run_id=run_id, fence=int(reply[1]))
            return Claim(status=status, lease=lease, hash=claimed_hash(reply, lease))
        return Claim(status=status)

    async def load(
        self, run_id: str, *, with_state: bool = True, claimed: Claim | None = None
    ) -> RunRecord | None:
        """The run as stored; without its (large) state unless asked. `claimed`: this
        delivery's claim, whose reply carries the hash when it is a resume's (not read again)."""
        if claimed is not None and claimed.hash is not None:
            view = Whole.of_whole(run_id, claimed.hash)
        else:
            # One round trip for everything: the compressed state is a few kilobytes, cheaper
            # to carry than a second request; it is only decompressed when asked for.
            view = await read_whole(self._redis, self._keys, Whole, run_id)
        return record_of(run_id, view, with_state=with_state)

    async def find_call(
        self, run_id: str, approval_id: str
    ) -> tuple[RunRecord | None, PendingCall | None]:
        """A run (without its state) and one of its current calls; (None, None) when the run
        is gone or a newer deploy wrote it, as the due-time pollers need it."""
        try:
            record = await self.load(run_id, with_state=False)
        except UnreadableEnvelope:
            return None, None
        return record, record.envelope.call(approval_id) if record else None

    async def update_envelope(self, envelope: RunEnvelope, lease: Lease, audit: str = "") -> None:
        fields = {rr.ENVELOPE: dump_envelope(envelope)}
        if envelope.conversation.thread is not None:
            fields[rr.THREAD] = envelope.conversation.thread
        await self._set(envelope.run_id, fields, lease, audit)

    async def locate(self, run_id: str) -> Conversation | None:
        """Where the run talks, read without the envelope (which may be unreadable)."""
        place = await read(self._redis, self._keys, Place, run_id)
        if place.channel is None or place.requester is None:
            return None
        return Conversation(
            channel=place.channel,
            requester=place.requester,
            thread=place.thread,
            reply_url=place.reply_url or None,
        )

    async def set_status(self, lease: Lease, message_id: str, steps: list[str]) -> None:
        await self.set_fields(lease, status_fields(message_id, steps))

    async def set_fields(self, lease: Lease, fields: dict[str, str]) -> None:
        """Fields of the run's hash written with the delivery's fence (messages posted: the
        status message's id and steps, a card's id)."""
        await self._set(lease.run_id, fields, lease)

    async def set_card_ts(self, run_id: str, approval_id: str, message_ts: str) -> None:
        """A card posted again after its message was gone: later redraws go to the new one.
        Not fenced: it changes nothing a step of the run reads."""
        await self._set(run_id, {rr.TS + approval_id: message_ts}, None)

    async def wait_for_approvals(
        self,
        envelope: RunEnvelope,
        state_json: str,
        *,
        lease: Lease,
        previous: RunEnvelope,
        reminders: dict[str, float],
        self_ok: bool,
        fields: Mapping[str, str] | None = None,
        audit: tuple[str, ...] = (),
        turns: frozenset[str] | None = None,
    ) -> None:
        """Store the interrupted run and open its approvals, all in one script.

        Calls that already carry a decision (the policy decided them) open nothing; the others
        get a deadline, a gate (who may decide), and a reminder time if `reminders` has one.
        `fields` are more per-call fields to write with them (`runtime.waiting.plan`); `audit`
        entries (`AuditTrail.entry`: the calls `requested`) are appended in the same step.
        `turns`: the model turns the hash holds, when known: dropped by name, unlooked for."""
        open_calls = [c for c in envelope.calls if c.decision is None]
        fields = {
            **(fields or {}),
            rr.ENVELOPE: dump_envelope(envelope),
            rr.STATUS: "waiting",
            rr.ROUND: str(envelope.round),
            rr.PENDING: str(len(open_calls)),
        }
        for call in envelope.calls:
            if call.decision is not None:
                fields[rr.DECISION + call.approval_id] = call.decision.model_dump_json()
        for call in open_calls:
            fields[rr.DEADLINE + call.approval_id] = repr(call.expires_at)
            gate = CallGate.of(envelope, call, self_ok=self_ok)
            fields[rr.GATE + call.approval_id] = gate.stored()
        member = f"{envelope.run_id}:{{}}".format
        delete = [f + c.approval_id for c in previous.calls for f in rr.PER_CALL] + [rr.FINAL]
        plan: dict[str, object] = {
            "delete": delete,
            "set": fields,
            "deadlines": {member(c.approval_id): repr(c.expires_at) for c in open_calls},
            "reminders": {member(aid): repr(at) for aid, at in reminders.items()},
            "audit": [json.loads(entry) for entry in audit],
        }
        if turns is not None and not previous.calls:
            # Nothing to take off the Home tab's index: the fields to drop are all known.
            plan["drop"] = [*delete, *(rr.TURN + key for key in turns)]
        # Evaluated only without calls: `max(..., default=await ...)` would ask Redis every time.
        last = max((c.expires_at for c in envelope.calls), default=None)
        if last is None:
            last = await self.server_time()
        shard = self._keys.shard_of(envelope.run_id)
        written = await self._wait(
            rs.Wait(
                run=self._keys.run(envelope.run_id),
                deadlines=shard.deadlines,
                reminders=shard.reminders,
                due_wake=shard.due_wake,
                audit=shard.audit,
                fence=lease.fence,
                expires_at=int(last + rr.STATE_GRACE_SECONDS),
                plan=json.dumps(plan),
                state=zlib.compress(state_json.encode(), 6),
                longest_sleep=longest_sleep(self._keys.shard_count),
                wake_length=WAKE_STREAM_LENGTH,
            )
        )
        if int(written) == -1:
            raise Fenced(envelope.run_id)
        if int(written) == -2:
            mark = await self.stop_mark(envelope.run_id)
            raise Stopped(envelope.run_id, mark or StopMark(user_id="?"))

    async def mark_finishing(self, lease: Lease, final_output: str) -> None:
        """Remember the answer before posting it, so a retried job posts it and runs nothing."""
        await self._set(lease.run_id, {rr.STATUS: "finishing", rr.FINAL: final_output}, lease)

    async def close(
        self,
        run_id: str,
        *,
        lease: Lease | None,
        outcome: str,
        approval_ids: tuple[str, ...] = (),
        keep: bool = False,
        audit: str = "",
    ) -> None:
        """End the run: delete it (or, `keep`, mark it failed until its TTL, for recovery by
        hand) and leave its tombstone; `audit` (`AuditTrail.entry`) is appended with it."""
        shard = self._keys.shard_of(run_id)
        written = await self._close(
            rs.Close(
                run=self._keys.run(run_id),
                deadlines=shard.deadlines,
                reminders=shard.reminders,
                tombstone=self._keys.tombstone(run_id),
                live_runs=shard.live_runs,
                audit=shard.audit,
                fence=str(lease.fence) if lease else "",
                tombstone_seconds=rr.TOMBSTONE_SECONDS,
                outcome=outcome,
                keep="1" if keep else "0",
                run_id=run_id,
                entry=audit,
                members=[f"{run_id}:{aid}" for aid in approval_ids],
            )
        )
        if int(written) == -1:
            raise Fenced(run_id)

    # --- the tool journal (see runtime/journal/invoker.py) ---------------------------------------

    async def journal_entry(self, lease: Lease, call_id: str) -> bytes | None:
        """The recorded outcome of a call, if it ran; Fenced if this delivery lost the run,
        Stopped if someone stopped it (a call that did not run yet must not start)."""
        return (await self.journal_read(lease, call_id))[0]

    async def journal_read(self, lease: Lease, call_id: str) -> tuple[bytes | None, int | None]:
        """`journal_entry`, and the round in which the call started without returning, if it
        did (a tool about to run reads and marks in one step: `CallStarts.begin`)."""
        view = await read(self._redis, self._keys, JournalRead, lease.run_id, call_id)
        # One this worker recorded and a failover lost: written back, as if never lost.
        recorded = view.recorded or await self.recent.reuse(lease.run_id, call_id)
        if recorded is None and view.fence != lease.fence:
            raise Fenced(lease.run_id)
        if recorded is None and (mark := view.stopped) is not None:
            raise Stopped(lease.run_id, mark)
        return recorded, view.started

    async def stop_mark(self, run_id: str) -> StopMark | None:
        return (await read(self._redis, self._keys, StopRead, run_id)).stopped

    async def replicated(self) -> None:
        """Return once the replicas have every write so far (`REDIS_MIN_REPLICAS`)."""
        await self._replication.confirm()

    async def journal_put(
        self, run_id: str, call_id: str, entry: str, audit: str = "", lease: Lease | None = None
    ) -> None:
        """Record a tool call's outcome and `audit` (its `AuditTrail.entry`), and return once
        the replicas have it (`REDIS_MIN_REPLICAS`): a failover then cannot make it run again.
        With `lease`, only while that delivery holds the run, else Fenced: an outcome the run's
        holder can work out again, which must not stand over what it decided since."""
        if lease is not None:
            await self._set(run_id, {rr.JOURNAL + call_id: entry}, lease, audit)
        else:
            await self._journal_put(
                rs.JournalPut(
                    run=self._keys.run(run_id),
                    audit=self._keys.shard_of(run_id).audit,
                    # One `executed` per call, however often sent, once the run is gone too.
                    once=self._keys.once(self._keys.run(run_id), f"{rr.JOURNAL}{run_id}:{call_id}"),
                    field=rr.JOURNAL + call_id,
                    outcome=entry,
                    entry=audit,
                    once_seconds=ONCE_SECONDS,
                )
            )
        self.recent.recorded(run_id, call_id, entry, audit)
        try:
            await self._replication.confirm()
        except PrimaryChanged:
            # The outcome was written to the new primary: held there before the job runs again
            # on it, so that the retry reuses it instead of running the tool once more.
            await self._replication.confirm(pinned=False)
            raise

    async def announce(self, run_id: str, call_id: str, audit: str) -> bool:
        """Append `audit` (an `AuditTrail.entry`, or '' for none) for a call decided without a
        person, once per call of the run however often its turn is decided again: the call's
        mark is written with it, by the script that writes a tool's outcome once. Whether this
        was the first time."""
        put = await self._journal_put(
            rs.JournalPut(
                run=self._keys.run(run_id),
                audit=self._keys.shard_of(run_id).audit,
                once=self._keys.once(self._keys.run(run_id), f"{rr.ANNOUNCED}{run_id}:{call_id}"),
                field=rr.ANNOUNCED + call_id,
                outcome="1",
                entry=audit,
                once_seconds=ONCE_SECONDS,
            )
        )
        return bool(put)

    async def journal(self, run_id: str) -> list[bytes]:
        """Every recorded tool outcome of the run, in no particular order."""
        return list((await read_whole(self._redis, self._keys, Whole, run_id)).journal.values())

    async def server_time(self) -> float:
        """Redis's clock, on which alone deadlines are set and checked (see `RedisClock`)."""
        return await self._clock.read(self._redis)


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value
