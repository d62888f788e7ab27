"""Recording decisions: one Lua script, so the first decision wins and exactly one resume follows.

The script checks that the approval is open, records the decision, and when it was the run's
last open approval, flips the run to `ready` and enqueues its resume job, all atomically. A
naive check-then-set enqueues many resumes under racing clicks; this cannot.
An expiry goes through the same script, so a click and an expiry racing for one approval resolve
to exactly one outcome.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, cast

import redis.asyncio as aioredis

from runtime.audit import AUDIT_MAX_ENTRIES
from runtime.envelope import Decision, Outcome
from runtime.keys import Keys

Status = Literal[
    "recorded",  # this decision was stored
    "decided",  # someone decided first; `decision` says who and how
    "expired",  # the deadline passed before this click
    "closed",  # the run is no longer waiting for decisions (resuming or finishing)
    "unknown",  # no such approval in this run and channel
    "gone",  # no such run (finished, or never existed)
    "early",  # an expiry was attempted before the deadline
    "open",  # (check only) a decision would be recorded now
]

# KEYS: run hash, deadlines zset, job stream, audit stream
# ARGV: approval id, decision JSON (without decided_at), channel ('' = any),
#       is_expiry ('1'/'0'), deadline member, run id, dry run ('1': check only, write nothing)
_RECORD = """
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
if ARGV[7] == '1' then return {'open'} end
local decision = cjson.decode(ARGV[2])
decision['decided_at'] = now
local encoded = cjson.encode(decision)
redis.call('HSET', run, 'decision:' .. aid, encoded)
-- In the same step as the decision, so the audit trail cannot miss or invent one.
local audited = cjson.encode({approval_id = aid, outcome = decision['outcome'],
  user_id = decision['user_id'], reason = decision['reason'], at = now})
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[8], '*', 'event', 'decided', 'run_id', ARGV[6],
  'details', audited)
if not expiry then redis.call('ZREM', KEYS[2], ARGV[5]) end
local pending = redis.call('HINCRBY', run, 'pending', -1)
if pending > 0 then return {'recorded', encoded, '0'} end
redis.call('HSET', run, 'status', 'ready')
local round = tonumber(redis.call('HGET', run, 'round'))
local job = cjson.encode({kind = 'resume', run_id = ARGV[6], round = round})
redis.call('XADD', KEYS[3], '*', 'job', job)
return {'recorded', encoded, '1'}
"""


@dataclass(frozen=True, slots=True)
class RecordResult:
    status: Status
    decision: Decision | None = None
    """The recorded decision, or for `decided` the one that won."""
    resume_enqueued: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Choice:
    """What a person chose, before the script stamps the time."""

    outcome: Outcome
    user_id: str | None = None
    user_name: str | None = None
    reason: str | None = None


class Approvals:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._record = redis.register_script(_RECORD)

    async def decide(
        self, run_id: str, approval_id: str, choice: Choice, *, channel: str
    ) -> RecordResult:
        """Record a person's decision, made in `channel`."""
        return await self._run(run_id, approval_id, choice, channel=channel, expiry=False)

    async def check(self, run_id: str, approval_id: str, *, channel: str) -> RecordResult:
        """What `decide` would answer now, without recording anything (`open` if it would)."""
        choice = Choice(outcome="rejected")
        return await self._run(
            run_id, approval_id, choice, channel=channel, expiry=False, dry_run=True
        )

    async def expire(self, run_id: str, approval_id: str) -> RecordResult:
        """Record that nobody decided in time; refused unless the deadline has passed."""
        choice = Choice(outcome="expired")
        return await self._run(run_id, approval_id, choice, channel="", expiry=True)

    async def _run(
        self,
        run_id: str,
        approval_id: str,
        choice: Choice,
        *,
        channel: str,
        expiry: bool,
        dry_run: bool = False,
    ) -> RecordResult:
        decision = {
            "outcome": choice.outcome,
            "user_id": choice.user_id,
            "user_name": choice.user_name,
            "reason": choice.reason,
        }
        reply = await self._record(
            keys=[
                self._keys.run(run_id),
                self._keys.deadlines,
                self._keys.jobs,
                self._keys.audit,
            ],
            args=[
                approval_id,
                json.dumps(decision),
                channel,
                "1" if expiry else "0",
                f"{run_id}:{approval_id}",
                run_id,
                "1" if dry_run else "0",
                AUDIT_MAX_ENTRIES,
            ],
        )
        parts = [p.decode() if isinstance(p, bytes) else str(p) for p in reply]
        status = cast(Status, parts[0])
        stored = Decision.model_validate_json(parts[1]) if len(parts) > 1 else None
        return RecordResult(status, stored, len(parts) > 2 and parts[2] == "1")
