-- Each delivery of a job takes the run with a new fence. A resume job of the current round
-- takes a `ready` run, or one a previous delivery was resuming (that delivery was given up by
-- the job queue, or failed): its writes are refused from now on. Any delivery that finds the
-- run `waiting` or `finishing` takes it to finish what a previous one left half done (cards not
-- yet posted, an answer not yet sent). The fence grows by a random step (ARGV[6]): a claim lost
-- with a failed primary and the next one on the promoted replica then hand out different fences,
-- and the delivery whose claim was lost cannot write over the other's.
--
-- KEYS
--   1 run: the run's hash
--   2 audit: the audit stream of the run's shard
-- ARGV
--   1 kind: the job's kind: 'start' or 'resume'
--   2 round: the round the job resumes (a start's is not read)
--   3 ttl_seconds: the hash's TTL in seconds while the run works (`RUNNING_TTL_SECONDS`)
--   4 run_id: the run id
--   5 event: the audit event of a resume (`resumed`)
--   6 fence_step: how much the fence grows (`fence_step`)
-- Returns {'gone'}; {'claimed', fence} (a start); {'claimed' or 'taken_over', fence, seconds,
-- microseconds of Redis's clock} (a resume); {'waiting' or 'finishing', fence}; {'stale'} (a
-- resume of another round); or {status} (not taken).
local seen = redis.call('HMGET', KEYS[1], F.status, F.round, F.channel, F.requester)
local status = seen[1]
if not status and redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
local resume = ARGV[1] == 'resume'
local current = resume and tonumber(seen[2]) == tonumber(ARGV[2])
local takes = (not resume and status == 'running')
  or (current and (status == 'ready' or status == 'resuming'))
if takes then
  local fence = redis.call('HINCRBY', KEYS[1], F.fence, ARGV[6])
  if not resume then return {'claimed', fence} end
  redis.call('HSET', KEYS[1], F.status, 'resuming')
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  live_by_outlive(KEYS[1], seen[4], tonumber(ARGV[3]) * 1000)  -- `home_index.lua`
  local t = redis_time()
  local details = cjson.encode({round = tonumber(ARGV[2]), fence = fence,
    taken_over = status == 'resuming', channel = seen[3],
    at = tonumber(t[1]) + tonumber(t[2]) / 1000000})
  redis.call('XADD', KEYS[2], '*', 'event', ARGV[5], 'run_id', ARGV[4], 'details', details)
  if status == 'resuming' then return {'taken_over', fence, t[1], t[2]} end
  return {'claimed', fence, t[1], t[2]}
end
if status == 'waiting' or status == 'finishing' then
  return {status, redis.call('HINCRBY', KEYS[1], F.fence, ARGV[6])}
end
if resume and not current then return {'stale'} end
return {status}
