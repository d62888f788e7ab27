-- One tick of a due-set poller (`runtime.jobs.due_set`): claim what is due in every set with a
-- lease, and say how long until the nearest member comes due, on Redis's clock.
-- Cost per tick is O(log N + due): it grows with what is due, not with what is pending. While
-- nothing is due it is TIME and one ZRANGE per set. A claim asks for the next tick at once
-- (0): the handlers may move or remove what they claimed; and it announces the lease's end on
-- the wake-up stream, if there is one, for the case that the claimer dies.
--
-- KEYS
--   1... due_keys: the due sets (ARGV[3] of them), then the wake-up stream (optional)
-- ARGV
--   1 lease_seconds: the lease in seconds
--   2 batch: the most members claimed per set (batch)
--   3 sets: n, the number of due sets
--   4 wake_length: wake-ups kept in the stream (approximately)
-- Returns {seconds until the nearest member is due ('' if none), due members of each set...,
-- the id of the announcement ('' if none)}.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local nearest = nil
local reply = {''}
local claimed = false
for i = 1, tonumber(ARGV[3]) do
  local key = KEYS[i]
  local due = {}
  local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if head[1] then
    local score = tonumber(head[2])
    if score <= now then
      due = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
      local leased = {}
      for _, member in ipairs(due) do
        leased[#leased + 1] = now + tonumber(ARGV[1])
        leased[#leased + 1] = member
      end
      if #leased > 0 then
        redis.call('ZADD', key, unpack(leased))
        claimed = true
      end
      score = now
    end
    if nearest == nil or score < nearest then nearest = score end
  end
  reply[i + 1] = due
end
if nearest ~= nil then reply[1] = tostring(math.max(0, nearest - now)) end
local announced = ''
if claimed and #KEYS > tonumber(ARGV[3]) then
  local ends = tostring(now + tonumber(ARGV[1]))
  announced = redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[4], '*', 'due', ends)
end
reply[#reply + 1] = announced
return reply
