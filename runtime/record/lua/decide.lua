-- Recording decisions: the first decision wins and exactly one resume follows.
--
-- Checks that the approval is open and that this person may decide it, from the call's own
-- gate (never from what the web process believes), counts approvals towards the quorum (each
-- with its note, if the approver wrote one), records the decision once the quorum is met (or at
-- the first rejection or answer: **Answer instead** decides alone, as a rejection does, and
-- the requester may not answer their own call, as they may not approve it), writes the audit
-- entry, and
-- when that was the run's last open approval flips the run to `ready` and enqueues its resume
-- job, all atomically. An expiry goes through the same script, so a click and an expiry racing
-- for one approval resolve to exactly one outcome. A call whose output is held (its gate's
-- `held`) is decided the same way: approving releases the output, rejecting withholds it, and
-- an answer releases the person's edit of it (its digest beside the held output's).
-- Grants and edits: `choices.lua`, loaded before this file.
--
-- KEYS
--   1 run: the run's hash
--   2 deadlines: the deadlines (a due set) of the run's shard
--   3 jobs: the job stream of the run's shard (the resume job goes there)
--   4 audit: the audit stream
--   5 reminders: the reminders (a due set)
--   6 tombstone: the run's tombstone (`close.lua` writes it), read only when there is no run
--   7... grant: only with a grant: the grant's hash (`grant:<id>`, in the run's shard), then the
--     channel's grants (a sorted set)
-- ARGV
--   1 approval_id: the approval id
--   2 choice: the choice (JSON `Choice`: outcome, user, reason, grant, edit, team, outside, batch,
--     in_channel, answer and what the audit entry keeps of it, note)
--   3 where: where it was made: a channel of the card or of a copy, `HOME_TAB`, or '' (anywhere: an
--     expiry)
--   4 mode: the mode: 'decide', 'check' (what a rejection would do, recording only a refusal) or
--     'expire'
--   5 member: the call's due-set member (`<run id>:<approval id>`)
--   6 run_id: the run id
--   7 groups: the groups of the gate the person is in (JSON list)
--   8 job: the resume job (JSON), enqueued when this was the last open approval
--   9 round: the round the caller read
--   10 denied_event: the `denied` audit event's name
--   11 digest: the digest of the call as the person was shown it (a stale one, or none, is refused:
--      `stale`)
-- Returns {'gone'}, {'finished'} (no run, and its tombstone says it ended), {'unknown'},
-- {'unreadable'}, {'decided', decision}, {'closed'}, {'expired'}, {'early'}, {refusal},
-- {'stale', approvals, edit}, {'already_approved', approvals}, {'open', approvals} (a check),
-- {'counted', approvals, edit} (towards a quorum), or {'recorded', decision, '1' when the resume
-- job was enqueued else '0'}, or {'regated', '[]', edit} (a choice with `regate`: the edit
-- stored, the call under the stricter rule's gate). The clicked call's reply, when the call
-- wrote anything, is kept in the run's hash with that write (`kept`), for its copies.
local function list(t) if #t == 0 then return '[]' end return cjson.encode(t) end
local run = KEYS[1]
local aid = ARGV[1]
local mode = ARGV[4]
-- Everything this script reads of the run, in one read, with the clicked call's take-once
-- reply (`DECIDE_ONCE`, `batch_open.lua`; else the deadline again).
local seen = redis.call('HMGET', run, F.deadline .. aid, F.gate .. aid, F.edit .. aid,
  F.copies .. aid, F.decision .. aid, F.status, F.round, F.approvals .. aid, F.denied .. aid,
  F.pending, F.reach .. aid, DECIDE_ONCE or F.deadline .. aid)
if DECIDE_ONCE and seen[12] then
  DECIDE_KEPT = true  -- a copy of the call: the reply the first one kept, nothing run again
  return cmsgpack.unpack(seen[12])
end
-- `fields` (field, value, ...) with the clicked call's `reply` kept beside them: a decision
-- script's write that takes effect carries its reply (`once_in_run.lua`'s `with_once`).
local function kept(fields, reply)
  if DECIDE_ONCE then
    fields[#fields + 1] = DECIDE_ONCE
    fields[#fields + 1] = cmsgpack.pack(reply)
  end
  return fields
end
-- The call's fields the Home tab's index is made from (`home_index.lua`), as read.
local indexed = {gate = seen[2], copies = seen[4], reach = seen[11]}
local deadline = seen[1]
if not deadline then
  if redis.call('EXISTS', run) == 1 then return {'unknown'} end
  -- No run. A copy of a call that decided (redis-py sends a timed-out call again) finds its
  -- reply gone with the hash once the run has finished: the tombstone says that much, which
  -- is true whether or not this call was the one that decided. A batch has no tombstone key.
  if KEYS[6] and redis.call('EXISTS', KEYS[6]) == 1 then return {'finished'} end
  return {'gone'}
end
local raw_edit = seen[3]
local gate = nil
local raw_gate = seen[2]
if raw_gate then
  local ok, decoded = pcall(cjson.decode, raw_gate)
  if ok and type(decoded) == 'table' and decoded['v'] == GATE_VERSION then gate = decoded end
end
gate = with_edit(raw_edit, gate)  -- an edited call binds its edited digest
-- Fail closed: nobody decides a call whose gate this code cannot read.
if mode ~= 'expire' and gate == nil then return {'unreadable'} end
local choice = cjson.decode(ARGV[2])
local copies = cjson.decode(seen[4] or '[]')
local function is_copy(channel)
  for _, c in ipairs(copies) do
    if c['channel'] == channel then return true end
  end
  return false
end
-- A decision comes from the card in the run's channel, from any copy of it, or from the Home
-- tab. A wrong run and approval pair found no deadline above.
local absent = false
if ARGV[3] ~= '' and gate['channel'] ~= ARGV[3] then
  if ARGV[3] == HOME_TAB then
    -- "Anyone in the channel", from the Home tab: only someone the web process found in the
    -- call's channel or a copy's (`in_channel`, asked of Slack); an older web never says so.
    local where = choice['in_channel']
    absent = gate['anyone'] == true and not (where == gate['channel'] or is_copy(where))
  elseif not is_copy(ARGV[3]) then
    return {'unknown'}
  end
end
local existing = seen[5]
if existing then return {'decided', existing} end
if seen[6] ~= 'waiting' then return {'closed'} end
if seen[7] ~= ARGV[9] then return {'closed'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if mode ~= 'expire' and now >= tonumber(deadline) then return {'expired'} end
if mode == 'expire' and now < tonumber(deadline) then return {'early'} end

local approving = choice['outcome'] == 'approved' or choice['outcome'] == 'approved_always'
local answering = choice['outcome'] == 'answered'
local entry = {approval_id = aid, user_id = choice['user_id'], user_name = choice['user_name'],
  reason = choice['reason'], at = now, team = choice['team']}
if approving and present(choice['note']) then entry['note'] = choice['note'] end
-- The answer's text as `AUDIT_ARGS` keeps it (`runtime.audit.arguments`: whole, too long, or
-- not at all); the decision itself always holds it, for the model to read.
if answering and type(choice['answer_kept']) == 'table' then
  for _, name in ipairs({'answer', 'answer_omitted', 'answer_bytes', 'answer_digest'}) do
    if present(choice['answer_kept'][name]) then entry[name] = choice['answer_kept'][name] end
  end
end
-- "Approve all"'s batch; an Approve always that covered this call too (`always.lua`).
for _, name in ipairs({'batch', 'via', 'always_on'}) do
  if present(choice[name]) then entry[name] = choice[name] end
end
if gate then
  for _, name in ipairs({'call_id', 'tool', 'agent', 'requester', 'channel', 'digest'}) do
    entry[name] = gate[name]
  end
  if type(gate['mcp_server']) == 'string' then entry['mcp_server'] = gate['mcp_server'] end
end
-- A held output's decision is audited as its release or withholding (`runtime.journal.held`).
local function event_of(outcome)
  if not (gate and gate['held'] == true) then return outcome end
  if outcome == 'approved' or outcome == 'approved_always' then return EVENT_OUTPUT_RELEASED end
  if outcome == 'rejected' or outcome == 'expired' then return EVENT_OUTPUT_WITHHELD end
  if outcome == 'answered' then return EVENT_OUTPUT_EDITED end  -- **Edit and release**
  return outcome
end
local function audit(event)
  local details = cjson.encode(entry)
  redis.call('XADD', KEYS[4], '*', 'event', event, 'run_id', ARGV[6], 'details', details)
end

if mode ~= 'expire' then
  local user = choice['user_id']
  local allowed = gate['anyone'] == true and not absent
  for _, u in ipairs(gate['users']) do if u == user then allowed = true end end
  for _, g in ipairs(cjson.decode(ARGV[7])) do
    for _, allowed_group in ipairs(gate['groups']) do
      if g == allowed_group then allowed = true end
    end
  end
  local refusal = nil
  -- `outside`: the web process found the person is no member of the installing workspace.
  if choice['outside'] == true and gate['external'] ~= true then
    refusal = 'outside'
  elseif not allowed then
    refusal = 'not_allowed'
  elseif (approving or answering) and user == gate['requester'] and gate['self_ok'] ~= true then
    refusal = 'self'
  elseif choice['outcome'] == 'approved_always' and gate['allow_always'] ~= true then
    refusal = 'not_offered'
  elseif gate['held'] == true and (ARGV[3] == HOME_TAB or present(choice['batch'])) then
    refusal = 'held_on_card'  -- a held output is released or withheld where it is shown
  else
    refusal = choice_refusal(gate, choice)  -- grants and edits (choices.lua)
  end
  if refusal then
    local reasons = {not_allowed = 'not_an_approver', self = 'self_approval',
      outside = 'outside_workspace'}
    if reasons[refusal] then
      -- One entry per person and call: clicking again cannot flood the trail.
      local denied = cjson.decode(seen[9] or '[]')
      local seen = false
      for _, u in ipairs(denied) do if u == user then seen = true end end
      if not seen then
        table.insert(denied, user)
        redis.call('HSET', run, unpack(kept({F.denied .. aid, cjson.encode(denied)}, {refusal})))
        entry['reason'] = reasons[refusal]
        audit(ARGV[10])
      end
    end
    return {refusal}
  end
  if type(gate['digest']) ~= 'string' or gate['digest'] == '' then return {'unreadable'} end
  if ARGV[11] ~= gate['digest'] then
    -- The call changed (an edit) since the person's screen drew it: nobody decides, or counts
    -- towards a quorum, a call they did not see. The card is drawn anew from this reply.
    return {'stale', seen[8] or '[]', raw_edit or ''}
  end
end

local approvals = cjson.decode(seen[8] or '[]')
local edited = ''
if present(choice['regate']) then
  -- An edit under a stricter rule: the call takes that rule's gate, bound to the edited digest,
  -- and nobody's approval counts yet (not even the editor's).
  local ok, next_gate = pcall(cjson.decode, choice['regate'])
  if mode ~= 'decide' or not present(choice['edit']) or not ok or type(next_gate) ~= 'table'
    or next_gate['v'] ~= GATE_VERSION or next_gate['round'] ~= gate['round']
    or next_gate['call_id'] ~= gate['call_id'] or next_gate['regated'] ~= true
    or next_gate['digest'] ~= choice['edit']['digest'] then
    return {'unreadable'}
  end
  edited = apply_edit(run, aid, gate, choice, entry, now, audit)
  home_unindex(run, aid, indexed)  -- the Home tab's index follows the gate (`home_index.lua`)
  local regated = {'regated', '[]', edited}
  redis.call('HSET', run, unpack(kept({F.gate .. aid, choice['regate']}, regated)))
  home_index(run, aid, {gate = choice['regate'], copies = seen[4], reach = seen[11]})
  -- The stricter rule's escalation counts from when the call was asked, and may be due
  -- already: the call's nudges are looked at again now (`runtime.waiting.reminders`).
  redis.call('ZADD', KEYS[5], now, ARGV[5])
  entry['quorum'] = next_gate['quorum']
  entry['rule'] = next_gate['rule_name']
  entry['when'] = next_gate['when']
  audit(EVENT_REGATED)
  return regated
end
if mode == 'decide' and present(choice['edit']) then
  edited = apply_edit(run, aid, gate, choice, entry, now, audit)
  raw_edit = edited
  approvals = {}
end
if approving then
  for _, a in ipairs(approvals) do
    if a['user_id'] == choice['user_id'] then return {'already_approved', list(approvals)} end
  end
end
if mode == 'check' then return {'open', list(approvals)} end

local quorum = 1
if gate then quorum = tonumber(gate['quorum']) end
if approving then
  local approval = {user_id = choice['user_id'], user_name = choice['user_name'],
    outcome = choice['outcome'], at = now}
  if present(choice['note']) then approval['note'] = choice['note'] end
  table.insert(approvals, approval)
  entry['approvals'] = #approvals
  entry['quorum'] = quorum
  if #approvals < quorum then
    local counted = list(approvals)
    local reply = {'counted', counted, edited}
    redis.call('HSET', run, unpack(kept({F.approvals .. aid, counted}, reply)))
    audit(event_of(choice['outcome']))
    return reply
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
if answering then decision['answer'] = choice['answer'] end
attach_choices(raw_edit, aid, ARGV[6], decision, choice, entry, now, {KEYS[7], KEYS[8]}, audit)
local encoded = cjson.encode(decision)
-- Nothing above wrote `pending`: the count read at the top is current.
local pending = (tonumber(seen[10]) or 1) - 1
home_unindex(run, aid, indexed)  -- decided: off the Home tabs' index
local recorded = {'recorded', encoded, '0'}
local fields = {F.decision .. aid, encoded, F.pending, pending}
if pending <= 0 then
  recorded[3] = '1'
  fields[5], fields[6] = F.status, 'ready'
end
redis.call('HSET', run, unpack(kept(fields, recorded)))
audit(event_of(choice['outcome']))
-- The expiry poller removes its own entry once the card shows the expiry.
if mode ~= 'expire' then redis.call('ZREM', KEYS[2], ARGV[5]) end
redis.call('ZREM', KEYS[5], ARGV[5])
if pending > 0 then return recorded end
redis.call('XADD', KEYS[3], '*', 'job', ARGV[8])
return recorded
