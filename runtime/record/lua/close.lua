-- The run ends: its hash goes (or, kept for recovery by hand, turns `failed`), its due entries
-- go, it leaves the live runs and the Home tab's index (`home_index.lua`), and the tombstone
-- stays.
--
-- KEYS
--   1 run: the run's hash
--   2 deadlines: the deadlines (a due set) of the run's shard
--   3 reminders: the reminders (a due set)
--   4 tombstone: the run's tombstone
--   5 live_runs: the live runs
--   6 audit: the audit stream
-- ARGV
--   1 fence: the writer's fence ('' for writes that any holder may make)
--   2 tombstone_seconds: the tombstone's TTL in seconds (`TOMBSTONE_SECONDS`)
--   3 outcome: the outcome, the tombstone's value
--   4 keep: '1' keeps the hash, as `failed`; '0' deletes it
--   5 run_id: the run id
--   6 entry: the audit entry (JSON list of its fields), or ''
--   7... members: the run's due-set members (`<run id>:<approval id>`) to remove
-- Returns 1 done, -1 fenced off.
-- One read: the fence, the requester, and for each call the fields its index entries come from.
local wanted = {F.fence, F.requester, ONCE or F.fence}
for i = 7, #ARGV do
  local aid = string.match(ARGV[i], ':(.*)$')
  for _, name in ipairs({F.gate, F.copies, F.reach, F.decision}) do
    wanted[#wanted + 1] = name .. aid
  end
end
local seen = redis.call('HMGET', KEYS[1], unpack(wanted))
local kept = once_found(seen[3])
if kept ~= nil then return kept end
local fence = seen[1]
local live = fence ~= false or redis.call('EXISTS', KEYS[1]) == 1
if live and ARGV[1] ~= '' and fence ~= ARGV[1] then return -1 end
-- Closed already (by this call, whose reply went with the hash, or by another): once only.
if not live and redis.call('EXISTS', KEYS[4]) == 1 then return 1 end
-- A decided call left the index and its due sets with its decision (`decide.lua`, `stop.lua`),
-- but for an expiry's deadline, which the expiry poller removes once the card shows it.
local deadlines, reminders = {}, {}
for i = 7, #ARGV do
  local at = 3 + (i - 7) * 4
  local decision = seen[at + 4]
  if not decision then
    home_unindex(KEYS[1], string.match(ARGV[i], ':(.*)$'),
      {gate = seen[at + 1], copies = seen[at + 2], reach = seen[at + 3]})
    reminders[#reminders + 1] = ARGV[i]
  end
  if not decision or string.find(decision, '"expired"', 1, true) then
    deadlines[#deadlines + 1] = ARGV[i]
  end
end
local requester = seen[2]
if requester then
  redis.call('ZREM', string.match(KEYS[1], '^(.*)run:[^:]*$') .. LIVE_BY .. requester, ARGV[5])
end
if live and ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], unpack(with_once({F.status, 'failed'}, 1)))
else
  redis.call('DEL', KEYS[1])
end
redis.call('ZREM', KEYS[5], ARGV[5])
if #deadlines > 0 then redis.call('ZREM', KEYS[2], unpack(deadlines)) end
if #reminders > 0 then redis.call('ZREM', KEYS[3], unpack(reminders)) end
redis.call('SET', KEYS[4], ARGV[3], 'EX', ARGV[2])
if ARGV[6] ~= '' then redis.call('XADD', KEYS[6], '*', unpack(cjson.decode(ARGV[6]))) end
return 1
