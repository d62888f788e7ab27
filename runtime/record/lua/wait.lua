-- The run stops for approvals: drop the last round's per-call fields and the working round's
-- model turns (the state holds them now: `runtime.record.turns`), store the state, open
-- the new approvals and their deadlines, and audit them as requested, all at once (so the trail
-- never names a request whose gate is not written yet). A deadline or reminder due sooner than a
-- due-set poller's longest sleep (ARGV[5]) wakes the pollers (`runtime.jobs.due_set`). Each
-- call joins the Home tab's index (`home_index.lua`); the last round's calls leave it.
--
-- KEYS
--   1 run: the run's hash
--   2 deadlines: the deadlines (a due set) of the run's shard
--   3 reminders: the reminders (a due set)
--   4 due_wake: the due sets' wake-up stream (`Keys.due_wake`)
--   5 audit: the audit stream
-- ARGV
--   1 fence: the writer's fence
--   2 expires_at: when the hash expires (epoch seconds: the last deadline and `STATE_GRACE_SECONDS`)
--   3 plan: the plan (JSON): `delete` (fields to drop), `set` (field -> value), `deadlines` and
--     `reminders` (due-set member -> epoch seconds), `audit` (entries, each a list of fields),
--     and, when the caller knows them all, `drop` (every field to drop, model turns included)
--   4 state: the SDK's RunState JSON, compressed (zlib)
--   5 longest_sleep: a due-set poller's longest sleep in seconds (`longest_sleep`)
--   6 wake_length: wake-ups kept in the stream (`WAKE_STREAM_LENGTH`)
-- Returns 1 written, 0 no such run, -1 fenced off, -2 stopped (no further card appears).
local seen = redis.call('HMGET', KEYS[1], F.fence, F.stopped, F.requester, ONCE or F.fence,
  F.final)
local kept = once_found(seen[4])
if kept ~= nil then return kept end
if seen[1] ~= ARGV[1] then
  if not seen[1] and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
  return -1
end
if seen[2] then return -2 end
local plan = cjson.decode(ARGV[3])
-- The last round's calls leave the index, as their gates read before they go.
-- With `drop` the caller knows every field to drop (no call of the last round, whose gates the
-- index would be read from, and each model turn the hash holds): no field is looked for.
local drop = {}
if plan['drop'] then
  -- The answer a finishing delivery wrote is dropped only when there is one (read above).
  for _, field in ipairs(plan['drop']) do
    if field ~= F.final or seen[5] then drop[#drop + 1] = field end
  end
else
  local gone = {}
  for _, field in ipairs(plan['delete']) do gone[field] = true end
  for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
    if gone[field] then
      drop[#drop + 1] = field
      if string.sub(field, 1, #F.gate) == F.gate then
        home_unindex(KEYS[1], string.sub(field, #F.gate + 1))
      end
    elseif string.sub(field, 1, #F.turn) == F.turn then
      drop[#drop + 1] = field
    end
  end
end
if #drop > 0 then redis.call('HDEL', KEYS[1], unpack(drop)) end
local fields = {F.state, ARGV[4]}
for field, value in pairs(plan['set']) do
  fields[#fields + 1] = field
  fields[#fields + 1] = value
end
redis.call('HSET', KEYS[1], unpack(with_once(fields, 1)))
-- Before the index: its keys take the run's new lifetime (`outlive`).
redis.call('EXPIREAT', KEYS[1], ARGV[2])
local t = redis_time()
local ttl = tonumber(ARGV[2]) * 1000 - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
live_by_outlive(KEYS[1], seen[3], ttl)
-- The new calls' fields are all in the plan (a call's id is new, or its last round's fields
-- were deleted above): the index is made from them, not read back.
local set = plan['set']
for field, value in pairs(set) do
  if string.sub(field, 1, #F.gate) == F.gate then
    local aid = string.sub(field, #F.gate + 1)
    home_index(KEYS[1], aid,
      {gate = value, copies = set[F.copies .. aid] or false, reach = set[F.reach .. aid] or false},
      ttl)
  end
end
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
if soonest ~= nil and soonest < tonumber(t[1]) + 1 + tonumber(ARGV[5]) then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'due', tostring(soonest))
end
for _, entry in ipairs(plan['audit']) do redis.call('XADD', KEYS[5], '*', unpack(entry)) end
return 1
