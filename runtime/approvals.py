"""Recording decisions: one Lua script, so the first decision wins and exactly one resume follows.

The script checks that the approval is open, counts approvals towards its quorum, records the
decision once the quorum is met (or at the first rejection), writes the audit entry, and when
that was the run's last open approval flips the run to `ready` and enqueues its resume job, all
atomically. A naive check-then-set enqueues many resumes under racing clicks; this cannot.
An expiry goes through the same script, so a click and an expiry racing for one approval resolve
to exactly one outcome. Who may click at all is checked before, by the web process.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal, cast

import redis.asyncio as aioredis

from runtime.audit import AUDIT_MAX_ENTRIES
from runtime.envelope import Approval, Decision, Outcome, PendingCall, RunEnvelope
from runtime.keys import Keys

Status = Literal[
    "recorded",  # this decision was stored
    "counted",  # an approval towards a quorum that is not met yet
    "already_approved",  # this person's approval already counts towards the quorum
    "decided",  # someone decided first; `decision` says who and how
    "expired",  # the deadline passed before this click
    "closed",  # the run is no longer waiting for decisions (resuming or finishing)
    "unknown",  # no such approval in this run and channel
    "gone",  # no such run (finished, or never existed)
    "early",  # an expiry was attempted before the deadline
    "open",  # (check only) a decision would be recorded now
]

# KEYS: run hash, deadlines, job stream, audit stream, reminders
# ARGV: 1 approval id, 2 choice JSON, 3 channel ('' = any), 4 is expiry ('1'/'0'),
#       5 deadline member, 6 run id, 7 dry run ('1': check only), 8 audit cap, 9 audit context
_RECORD = """
local function list(t) if #t == 0 then return '[]' end return cjson.encode(t) end
local run = KEYS[1]
if redis.call('EXISTS', run) == 0 then return {'gone'} end
local aid = ARGV[1]
local deadline = redis.call('HGET', run, 'deadline:' .. aid)
if not deadline then return {'unknown'} end
if ARGV[3] ~= '' and redis.call('HGET', run, 'channel') ~= ARGV[3] then return {'unknown'} end
local existing = redis.call('HGET', run, 'decision:' .. aid)
if existing then return {'decided', existing} end
if redis.call('HGET', run, 'status') ~= 'waiting' then return {'closed'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local expiry = ARGV[4] == '1'
if not expiry and now >= tonumber(deadline) then return {'expired'} end
if expiry and now < tonumber(deadline) then return {'early'} end
local choice = cjson.decode(ARGV[2])
local approvals = cjson.decode(redis.call('HGET', run, 'approvals:' .. aid) or '[]')
local approving = choice['outcome'] == 'approved' or choice['outcome'] == 'approved_always'
if approving then
  for _, a in ipairs(approvals) do
    if a['user_id'] == choice['user_id'] then return {'already_approved', list(approvals)} end
  end
end
if ARGV[7] == '1' then return {'open', list(approvals)} end

local entry = cjson.decode(ARGV[9])
entry['user_id'] = choice['user_id']
entry['user_name'] = choice['user_name']
entry['reason'] = choice['reason']
entry['at'] = now
local function audit(event)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[8], '*', 'event', event, 'run_id', ARGV[6],
    'details', cjson.encode(entry))
end

local quorum = tonumber(redis.call('HGET', run, 'quorum:' .. aid) or '1')
if approving then
  table.insert(approvals, {user_id = choice['user_id'], user_name = choice['user_name'],
    outcome = choice['outcome'], at = now})
  entry['approvals'] = #approvals
  entry['quorum'] = quorum
  if #approvals < quorum then
    local counted = list(approvals)
    redis.call('HSET', run, 'approvals:' .. aid, counted)
    audit(choice['outcome'])
    return {'counted', counted}
  end
end

local outcome = choice['outcome']
if approving then
  -- "Always" only if every approver chose it: one person cannot waive the others' say.
  for _, a in ipairs(approvals) do
    if a['outcome'] ~= 'approved_always' then outcome = 'approved' end
  end
end
local decision = {outcome = outcome, user_id = choice['user_id'], user_name = choice['user_name'],
  reason = choice['reason'], decided_at = now, digest = entry['digest']}
if #approvals > 0 then decision['approvals'] = approvals end
local encoded = cjson.encode(decision)
redis.call('HSET', run, 'decision:' .. aid, encoded)
audit(choice['outcome'])
if not expiry then redis.call('ZREM', KEYS[2], ARGV[5]) end
redis.call('ZREM', KEYS[5], ARGV[5])
local pending = redis.call('HINCRBY', run, 'pending', -1)
if pending > 0 then return {'recorded', encoded, '0'} end
redis.call('HSET', run, 'status', 'ready')
local round = tonumber(redis.call('HGET', run, 'round'))
local job = cjson.encode({kind = 'resume', run_id = ARGV[6], round = round})
redis.call('XADD', KEYS[3], '*', 'job', job)
return {'recorded', encoded, '1'}
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordResult:
    status: Status
    decision: Decision | None = None
    """The recorded decision, or for `decided` the one that won."""
    approvals: tuple[Approval, ...] = ()
    """For `counted`, `already_approved` and `open`: the approvals so far."""
    resume_enqueued: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Choice:
    """What a person chose, before the script stamps the time."""

    outcome: Outcome
    user_id: str | None = None
    user_name: str | None = None
    reason: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditContext:
    """What the audit entry says about the call being decided."""

    call_id: str
    tool: str
    agent: str
    requester: str
    channel: str
    digest: str | None

    @classmethod
    def of(cls, envelope: RunEnvelope, call: PendingCall) -> AuditContext:
        return cls(
            call_id=call.call_id,
            tool=call.tool,
            agent=call.agent,
            requester=envelope.conversation.requester,
            channel=envelope.conversation.channel,
            digest=call.digest or None,
        )


class Approvals:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._record = redis.register_script(_RECORD)

    async def decide(
        self,
        run_id: str,
        approval_id: str,
        choice: Choice,
        *,
        channel: str,
        context: AuditContext | None,
    ) -> RecordResult:
        """Record a person's decision, made in `channel`."""
        return await self._run(run_id, approval_id, choice, channel, context, mode="decide")

    async def check(
        self, run_id: str, approval_id: str, user_id: str, *, channel: str
    ) -> RecordResult:
        """What an approval by `user_id` would do now, recording nothing (`open` if it counts)."""
        choice = Choice(outcome="approved", user_id=user_id)
        return await self._run(run_id, approval_id, choice, channel, None, mode="check")

    async def expire(
        self, run_id: str, approval_id: str, context: AuditContext | None
    ) -> RecordResult:
        """Record that nobody decided in time; refused unless the deadline has passed."""
        choice = Choice(outcome="expired")
        return await self._run(run_id, approval_id, choice, "", context, mode="expire")

    async def _run(
        self,
        run_id: str,
        approval_id: str,
        choice: Choice,
        channel: str,
        context: AuditContext | None,
        *,
        mode: Literal["decide", "check", "expire"],
    ) -> RecordResult:
        reply = await self._record(
            keys=[
                self._keys.run(run_id),
                self._keys.deadlines,
                self._keys.jobs,
                self._keys.audit,
                self._keys.reminders,
            ],
            args=[
                approval_id,
                json.dumps(asdict(choice)),
                channel,
                "1" if mode == "expire" else "0",
                f"{run_id}:{approval_id}",
                run_id,
                "1" if mode == "check" else "0",
                AUDIT_MAX_ENTRIES,
                json.dumps(asdict(context) if context else {}),
            ],
        )
        parts = [p.decode() if isinstance(p, bytes) else str(p) for p in reply]
        status = cast(Status, parts[0])
        if status in ("counted", "already_approved", "open"):
            approvals = tuple(Approval.model_validate(a) for a in json.loads(parts[1]))
            return RecordResult(status=status, approvals=approvals)
        decision = Decision.model_validate_json(parts[1]) if len(parts) > 1 else None
        return RecordResult(
            status=status,
            decision=decision,
            approvals=decision.approvals if decision else (),
            resume_enqueued=len(parts) > 2 and parts[2] == "1",
        )
