-- Approve always, in the single decision script: `batch_open.lua` opens `decide.lua`'s body as
-- the function `decide_one`, and this file closes it, decides the clicked call with it, and,
-- when that recorded `approved_always`, approves with the same body each other open call of
-- the round that falls under the same rule (its key in the run's `rules` field: tool, agent,
-- rule and policy version, `runtime.record.permissions`), needs one approval and no typed
-- value, and is neither edited nor re-gated, when the person may decide it and pressed the
-- card in the run's channel. Each such call gets its own decision and its own `approved` audit
-- entry (`via: always`, `always_on`: the clicked call), bound to its own digest.
--
-- KEYS: the decision script's (`decide.lua`), passed to `decide_one` as they are.
-- ARGV: the decision script's, for the clicked call; each covered call's are built here (its
--   approval id, the choice with `via` and `always_on`, its due-set member and its digest).
-- Returns the clicked call's reply; when it was recorded, with its third element '1' when any
-- of the decisions enqueued the resume job, and a fourth: the covered calls (JSON list of
-- [approval id, decision JSON]).
end
-- The clicked call keeps its reply in the run's hash with its decision (`once_in_run.lua`);
-- the calls it covers are decided within this one call and keep none of their own.
DECIDE_ONCE = ONCE
local reply = decide_one(KEYS, ARGV)
DECIDE_ONCE = false
if DECIDE_KEPT then return reply end
if ARGV[4] ~= 'decide' or reply[1] ~= 'recorded' then return reply end
if cjson.decode(reply[2])['outcome'] ~= 'approved_always' then return reply end
local ok, keys = pcall(cjson.decode, redis.call('HGET', KEYS[1], F.rules) or '{}')
if not ok or type(keys) ~= 'table' or type(keys[ARGV[1]]) ~= 'string' then return reply end
local choice = cjson.decode(ARGV[2])
local groups = cjson.decode(ARGV[7])

local function may_cover(gate)
  if gate['allow_always'] ~= true or (tonumber(gate['quorum']) or 1) > 1 then return false end
  if type(gate['confirm']) == 'string' or gate['regated'] == true then return false end
  if gate['channel'] ~= ARGV[3] then return false end  -- the thread's card, not a copy or Home
  if choice['outside'] == true and gate['external'] ~= true then return false end
  if choice['user_id'] == gate['requester'] and gate['self_ok'] ~= true then return false end
  if gate['anyone'] == true then return true end
  for _, u in ipairs(gate['users'] or {}) do if u == choice['user_id'] then return true end end
  for _, g in ipairs(groups) do
    for _, allowed in ipairs(gate['groups'] or {}) do if g == allowed then return true end end
  end
  return false
end

local covered = {}
local enqueued = reply[3]
for aid, key in pairs(keys) do
  if aid ~= ARGV[1] and key == keys[ARGV[1]] then
    local found = redis.call('HMGET', KEYS[1], F.gate .. aid, F.decision .. aid, F.edit .. aid,
      F.deadline .. aid)
    local okg, gate = pcall(cjson.decode, found[1] or '')
    if okg and type(gate) == 'table' and gate['v'] == GATE_VERSION and not found[2]
        and not found[3] and found[4] and may_cover(gate) then
      local sibling = {outcome = 'approved', user_id = choice['user_id'],
        user_name = choice['user_name'], team = choice['team'], outside = choice['outside'],
        via = 'always', always_on = ARGV[1]}
      local argv = {aid, cjson.encode(sibling), ARGV[3], 'decide', ARGV[6] .. ':' .. aid, ARGV[6],
        ARGV[7], ARGV[8], ARGV[9], ARGV[10], gate['digest']}
      local got = decide_one(KEYS, argv)
      if got[1] == 'recorded' then
        table.insert(covered, {aid, got[2]})
        if got[3] == '1' then enqueued = '1' end
      end
    end
  end
end
if #covered == 0 then return reply end
-- The reply kept for a copy is the whole one, with the calls covered (one write more, only
-- when an Approve always covered any).
local whole = {reply[1], reply[2], enqueued, cjson.encode(covered)}
if ONCE then redis.call('HSET', KEYS[1], ONCE, cmsgpack.pack(whole)) end
return whole
