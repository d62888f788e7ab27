-- Append items to a thread's history, keep only the newest, and start its time to live again.
--
-- KEYS
--   1 conversation: the conversation's list
-- ARGV
--   1 ttl_seconds: the time to live, in seconds
--   2 most: the most items kept
--   3... items: the items, as JSON, oldest first
-- Returns the list's length afterwards.
local most = tonumber(ARGV[2])
if #ARGV > 2 and most > 0 then
  -- The list exists now: its length is RPUSH's reply, trimmed only when past the most kept.
  local length = redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
  if length > most then
    redis.call('LTRIM', KEYS[1], -most, -1)
    length = most
  end
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
  return length
end
if #ARGV > 2 then
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
end
redis.call('LTRIM', KEYS[1], -most, -1)
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
end
return redis.call('LLEN', KEYS[1])
