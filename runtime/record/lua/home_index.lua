-- The Home tab's index of open calls (`runtime.waiting.index`), kept by the scripts that write,
-- widen and close gates, from the gate itself, so that it follows the gates: one sorted set per
-- person, user group and (for calls anyone in a channel may decide) channel, of the run's shard
-- (`HOME_WAITING .. <id>`, member `<run id>:<approval id>`, score when the run stopped for the
-- call), and per shard the sets of the groups and channels that have one (`HOME_GROUPS`,
-- `HOME_CHANNELS`). Its keys are built from the run's key, so they share its hash slot.
-- Readers check every entry against its call and drop what is no longer open.
--
-- KEYS, ARGV: the including script's; these functions take the run's hash key (in its KEYS)
-- and an approval id, and touch only keys of that hash's slot. What a script already holds
-- (the call's fields, the run's lifetime, Redis's clock) it passes, so nothing is read twice.
local function home_prefix(run) return string.match(run, '^(.*)run:[^:]*$') end
local function home_member(run, aid) return string.match(run, 'run:([^:]*)$') .. ':' .. aid end

-- Redis's clock, asked once per script whoever needs it first: {seconds, microseconds}.
local clock = nil
local function redis_time()
  if not clock then clock = redis.call('TIME') end
  return clock
end
local function redis_now()
  local t = redis_time()
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- Redis 7 lengthens a key's TTL, and never shortens it, in one command (`PEXPIRE ... GT`);
-- 6.2 has no GT (nor `redis.REDIS_VERSION_NUM`, hence the `or 0`): it reads the key's TTL first.
local EXPIRE_GT = (redis.REDIS_VERSION_NUM or 0) >= 0x070000

-- An index key lives at least as long as each run it names, and no longer than the longest: an
-- entry whose run expired without closing goes with its key (the keys are one per person, group
-- and channel: none may stay forever). `ttl`: the run's TTL in ms, when the script just set it.
-- Every script that adds to an index key gives it a TTL in the same step, so a key has one
-- unless this script just made it (`added`: it added to the key): on Redis 7 such a key gets
-- the run's with `NX` (a key made just now has none), else its TTL grows with `GT` (which
-- leaves a key without one as it is).
local function outlive(key, run, ttl, added)
  ttl = ttl or redis.call('PTTL', run)
  if ttl <= 0 then return end
  if EXPIRE_GT then
    if not (added and redis.call('PEXPIRE', key, ttl, 'NX') == 1) then
      redis.call('PEXPIRE', key, ttl, 'GT')
    end
  elseif redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- The requester's live runs (`LIVE_BY`, the Home tab's "Your runs"), after the run's TTL grew
-- (`added`: the run was just added to them, as `outlive`).
local function live_by_outlive(run, requester, ttl, added)
  if requester then outlive(home_prefix(run) .. LIVE_BY .. requester, run, ttl, added) end
end

-- A call's fields the index is made from ({gate, copies, reach}, false when absent), in one
-- read, for a script that does not hold them already.
local function home_fields(run, aid)
  local seen = redis.call('HMGET', run, F.gate .. aid, F.copies .. aid, F.reach .. aid)
  return {gate = seen[1], copies = seen[2], reach = seen[3]}
end

-- {index key, set of such keys, id} for each index the call's gate puts it in.
local function home_entries(run, call)
  if not call.gate then return {} end
  local ok, gate = pcall(cjson.decode, call.gate)
  if not ok or type(gate) ~= 'table' then return {} end
  -- A held output is released or withheld on its card, where it is shown: not on Home tabs.
  if gate['held'] == true then return {} end
  local prefix = home_prefix(run)
  local found = {}
  local function add(kind, id)
    if type(id) == 'string' and id ~= '' then
      table.insert(found, {prefix .. HOME_WAITING .. id, kind and (prefix .. kind), id})
    end
  end
  if gate['anyone'] == true then
    add(HOME_CHANNELS, gate['channel'])
    local read, copies = pcall(cjson.decode, call.copies or '[]')
    if read and type(copies) == 'table' then
      for _, copy in ipairs(copies) do
        if type(copy) == 'table' then add(HOME_CHANNELS, copy['channel']) end
      end
    end
    return found
  end
  for _, user in ipairs(gate['users'] or {}) do add(nil, user) end
  for _, group in ipairs(gate['groups'] or {}) do add(HOME_GROUPS, group) end
  return found
end

-- The call joins the indexes of its gate; `call`: its `home_fields`, `ttl` as for `outlive`.
local function home_index(run, aid, call, ttl)
  call = call or home_fields(run, aid)
  local asked = nil
  if call.reach then
    local ok, reach = pcall(cjson.decode, call.reach)
    if ok and type(reach) == 'table' then asked = tonumber(reach['asked_at']) end
  end
  if asked == nil then asked = redis_now() end
  local member = home_member(run, aid)
  for _, entry in ipairs(home_entries(run, call)) do
    ttl = ttl or redis.call('PTTL', run)
    redis.call('ZADD', entry[1], asked, member)
    outlive(entry[1], run, ttl, true)
    if entry[2] then
      -- A group or channel already in the set: the set is not new (and has its TTL).
      outlive(entry[2], run, ttl, redis.call('SADD', entry[2], entry[3]) == 1)
    end
  end
end

-- Before the gate changes or goes: the entries its present gate made (`call` as above).
local function home_unindex(run, aid, call)
  call = call or home_fields(run, aid)
  local member = home_member(run, aid)
  for _, entry in ipairs(home_entries(run, call)) do
    redis.call('ZREM', entry[1], member)
    if entry[2] and redis.call('EXISTS', entry[1]) == 0 then
      redis.call('SREM', entry[2], entry[3])
    end
  end
end
