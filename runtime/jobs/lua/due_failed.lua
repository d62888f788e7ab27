-- Count one more failed try of a member; on the last, move it from the due set to the parked one.
--
-- KEYS
--   1 due_set: the due set
--   2 tries: the tries of its members (a hash, `Keys.due_tries`)
--   3 parked: the parked members (a sorted set, `Keys.parked`)
-- ARGV
--   1 member: the member
--   2 max_tries: the tries before it is parked (`MAX_TRIES`)
--   3 tries_ttl: how long the tries hash is kept after the last failure, in seconds
-- Returns the tries so far and what became of it: retry, parked, or gone (removed meanwhile,
-- say by a click).
local tries = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('EXPIRE', KEYS[2], ARGV[3])
if tries < tonumber(ARGV[2]) then
  return {tries, 'retry'}
end
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return {tries, 'gone'}
end
redis.call('ZADD', KEYS[3], redis.call('TIME')[1], ARGV[1])
return {tries, 'parked'}
