-- Stopping a run, racing decisions in the same way decisions race each other: a stop and a
-- decision on one run resolve in one order, each seeing the other's outcome.
-- Who may stop: the requester, anyone who may decide one of its open calls, and `ADMINS`.
-- "Anyone" means anyone stopping in the call's channel (the card's or a copy's): a stop from
-- elsewhere (another channel, the Home tab, which offers Stop on the requester's runs only)
-- does not count as one.
-- A run nobody is working on (waiting for people, or decided and not yet resumed) stops here
-- and now: its open approvals are decided `stopped`, their due entries go, the run turns
-- `stopped` and its tombstone is laid. A working run gets the `stopped` field and its worker
-- stops at the next safe point.
--
-- KEYS
--   1 run: the run's hash
--   2 deadlines: the deadlines (a due set) of the run's shard
--   3 reminders: the reminders (a due set)
--   4 audit: the audit stream
--   5 tombstone: the run's tombstone
--   6 live_runs: the live runs
--   7 stops: the stops stream, which the run's worker follows (absent from an older caller)
-- ARGV
--   1 who: who stops (JSON {user_id, user_name, team?})
--   2 groups: the groups the person is in (JSON list)
--   3 admins: the admins (JSON {users, groups})
--   4 run_id: the run id
--   5 event: the `stopped` audit event's name
--   6 tombstone_seconds: the tombstone's TTL in seconds
--   7 stopped_seconds: how long a stopped run's hash is kept, in seconds
--   8 stops_length: stops kept in the stops stream (approximately)
--   9 where: where the stop came from: a channel, or `HOME_TAB`
-- Returns {'gone'}, {'already', stopper}, {'closed'}, {'not_allowed'}, {'stopping', stopper}
-- (its worker stops it), or {'stopped', stopper, the approval ids decided `stopped` (JSON)}.
local run = KEYS[1]
if redis.call('EXISTS', run) == 0 then return {'gone'} end
local status = redis.call('HGET', run, F.status)
local already = redis.call('HGET', run, F.stopped)
if already then return {'already', already} end
local live = {running = true, waiting = true, ready = true, resuming = true}
if not live[status] then return {'closed'} end
local who = cjson.decode(ARGV[1])
local user = who['user_id']
local member_of = cjson.decode(ARGV[2])
local function listed(users, groups)
  for _, u in ipairs(users) do if u == user then return true end end
  for _, g in ipairs(groups) do
    for _, mine in ipairs(member_of) do if g == mine then return true end end
  end
  return false
end
local admins = cjson.decode(ARGV[3])
local allowed = user == redis.call('HGET', run, F.requester)
  or listed(admins['users'], admins['groups'])
local fields = redis.call('HKEYS', run)
local open = {}
for _, field in ipairs(fields) do
  if string.sub(field, 1, #F.gate) == F.gate then
    local aid = string.sub(field, #F.gate + 1)
    if redis.call('HEXISTS', run, F.decision .. aid) == 0 then
      table.insert(open, aid)
      local ok, gate = pcall(cjson.decode, redis.call('HGET', run, field))
      if ok and type(gate) == 'table' then
        -- With no `where` (ARGV[9]), "anyone" counts nowhere: fail closed.
        local here = false
        if gate['anyone'] == true and ARGV[9] then
          here = ARGV[9] == gate['channel']
          local raw = redis.call('HGET', run, F.copies .. aid) or '[]'
          local read, copies = pcall(cjson.decode, raw)
          if read and type(copies) == 'table' then
            for _, c in ipairs(copies) do
              if type(c) == 'table' and c['channel'] == ARGV[9] then here = true end
            end
          end
        end
        if here or listed(gate['users'], gate['groups']) then allowed = true end
      end
    end
  end
end
if not allowed then return {'not_allowed'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
who['at'] = now
local encoded = cjson.encode(who)
redis.call('HSET', run, F.stopped, encoded)
local details = cjson.encode({user_id = user, user_name = who['user_name'], at = now,
  channel = redis.call('HGET', run, F.channel), status = status, team = who['team']})
redis.call('XADD', KEYS[4], '*', 'event', ARGV[5], 'run_id', ARGV[4], 'details', details)
if status == 'running' or status == 'resuming' then
  -- Its worker hears it on the stream (an old script's stop is found by the slower poll).
  if KEYS[7] then
    redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[8], '*', 'run_id', ARGV[4])
  end
  return {'stopping', encoded}
end
local decision = cjson.encode({outcome = 'stopped', user_id = user, user_name = who['user_name'],
  decided_at = now})
for _, aid in ipairs(open) do
  home_unindex(run, aid)
  redis.call('HSET', run, F.decision .. aid, decision)
  redis.call('ZREM', KEYS[2], ARGV[4] .. ':' .. aid)
  redis.call('ZREM', KEYS[3], ARGV[4] .. ':' .. aid)
end
redis.call('HSET', run, F.status, 'stopped', F.pending, 0)
redis.call('ZREM', KEYS[6], ARGV[4])
local requester = redis.call('HGET', run, F.requester)
if requester then
  redis.call('ZREM', string.match(run, '^(.*)run:[^:]*$') .. LIVE_BY .. requester, ARGV[4])
end
redis.call('EXPIRE', run, ARGV[7])
redis.call('SET', KEYS[5], 'stopped', 'EX', ARGV[6])
return {'stopped', encoded, cjson.encode(open)}
