-- Grants and edits inside the decision script: functions that `decide.lua` calls, loaded just
-- before it (`runtime.record.layout`), so that the decision script itself only names the hooks:
--
-- - `with_edit(raw_edit, gate)`: once a call was edited, its gate binds the edited digest, so
--   every later approval (towards a quorum) counts for the edited arguments;
-- - `choice_refusal(gate, choice)`: a grant is refused unless the call's gate offers one that
--   long (never under a quorum); an edit unless the gate allows edits and the editor saw the
--   arguments as they stand (`previous_digest`); an approval of a call whose gate names a
--   `confirm` argument unless the approver typed its value (`confirm_value`) exactly; an answer
--   (**Answer instead**) where the gate says `answer = false`, or without its text;
-- - `apply_edit(...)`: store the edit (`edit:<aid>`), write the `edited` audit entry with both
--   digests and restart the quorum's count on the new arguments;
-- - `attach_choices(...)`: put the edit into an approving decision and, for a grant, create the
--   grant (`runtime.grants.store` reads it) and write `granted`, in the same script as the
--   decision.
--
-- KEYS and ARGV: none of their own. They are the decision script's (`decide.lua`), which hands
-- `attach_choices` its KEYS 6 and 7 (the grant's hash, the channel's grants) when a grant is
-- chosen. EVENT_EDITED and EVENT_GRANTED come with the script's constants.
local function present(v) return v ~= nil and v ~= cjson.null end

local function with_edit(raw, gate)
  if gate and raw then gate['digest'] = cjson.decode(raw)['digest'] end
  return gate
end

local function choice_refusal(gate, choice)
  local grant, edit = choice['grant'], choice['edit']
  if present(grant) then
    local most = tonumber(gate['grant_max_seconds']) or 0
    if present(edit) or choice['outcome'] ~= 'approved' or tonumber(gate['quorum']) > 1
      or most <= 0 or tonumber(grant['seconds']) > most then
      return 'grant_not_offered'
    end
  end
  -- A typed confirmation: the value of the gate's argument, bound with its digest.
  local approving = choice['outcome'] == 'approved' or choice['outcome'] == 'approved_always'
  if approving and type(gate['confirm']) == 'string' then
    local typed = choice['confirm']
    if not present(typed) then return 'confirm_needed' end
    if type(gate['confirm_value']) ~= 'string' or typed ~= gate['confirm_value'] then
      return 'confirm_wrong'
    end
  end
  if choice['outcome'] == 'answered' then
    if gate['answer'] == false then return 'answer_not_offered' end
    if type(choice['answer']) ~= 'string' or choice['answer'] == '' then return 'unreadable' end
  end
  if present(edit) then
    if gate['allow_edit'] ~= true or choice['outcome'] ~= 'approved' then
      return 'edit_not_offered'
    end
    if edit['previous_digest'] ~= gate['digest'] then return 'edit_stale' end
  end
  return nil
end

local function apply_edit(run, aid, gate, choice, entry, now, audit)
  local edit = choice['edit']
  local stored = cjson.encode({arguments = edit['arguments'], digest = edit['digest'],
    previous_digest = gate['digest'], user_id = choice['user_id'],
    user_name = choice['user_name'], at = now})
  redis.call('HSET', run, F.edit .. aid, stored)
  redis.call('HDEL', run, F.approvals .. aid)
  entry['previous_digest'] = gate['digest']
  entry['digest'] = edit['digest']
  gate['digest'] = edit['digest']
  audit(EVENT_EDITED)
  return stored
end

-- KEYS of a grant (passed only with one): the grant's hash, the channel's index.
-- `raw`: the call's edit as stored now (by `apply_edit` in this very decision, if it edited).
local function attach_choices(raw, aid, run_id, decision, choice, entry, now, grant_keys, audit)
  if raw and (decision['outcome'] == 'approved' or decision['outcome'] == 'approved_always') then
    decision['edit'] = cjson.decode(raw)
  end
  local grant = choice['grant']
  if not present(grant) then return end
  local seconds = tonumber(grant['seconds'])
  local ends_at = now + seconds
  local record = {id = grant['id'], scope = grant['scope'], channel = entry['channel'],
    agent = entry['agent'], tool = entry['tool'], user_id = choice['user_id'],
    user_name = choice['user_name'], at = now, ends_at = ends_at, seconds = seconds,
    run_id = run_id, approval_id = aid}
  if grant['scope'] == 'arguments' then record['digest'] = entry['digest'] end
  if entry['mcp_server'] then record['mcp_server'] = entry['mcp_server'] end
  if choice['outside'] == true then record['outside'] = true end  -- see runtime.grants.check
  if type(choice['team']) == 'string' then record['team'] = choice['team'] end
  redis.call('HSET', grant_keys[1], 'grant', cjson.encode(record), 'uses', 0)
  redis.call('EXPIREAT', grant_keys[1], math.ceil(ends_at))
  redis.call('ZREMRANGEBYSCORE', grant_keys[2], '-inf', now)  -- ended ones: the index stays short
  redis.call('ZADD', grant_keys[2], ends_at, grant['id'])
  if redis.call('TTL', grant_keys[2]) < seconds then
    redis.call('EXPIRE', grant_keys[2], seconds + 1)
  end
  decision['granted'] = {id = grant['id'], scope = grant['scope'], ends_at = ends_at,
    user_id = choice['user_id'], user_name = choice['user_name']}
  entry['grant_id'] = grant['id']
  entry['grant_scope'] = grant['scope']
  entry['ends_at'] = ends_at
  audit(EVENT_GRANTED)
end
