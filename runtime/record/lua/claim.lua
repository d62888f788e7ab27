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
-- microseconds of Redis's clock, the hash} (a resume: the hash as read before the claim wrote
-- the new fence and status, field, value, ..., which the delivery loads the run from; a copy
-- of the call gets the reply without it); {'waiting' or 'finishing', fence}; {'stale'} (a
-- resume of another round); or {status} (not taken).
local names = {F.status, F.round, F.channel, F.requester, F.fence, ONCE or F.fence}
local seen, whole = {}, nil
if ARGV[1] == 'resume' then
  -- A resume reads the whole hash here, in place of the delivery's load after the claim.
  whole = redis.call('HGETALL', KEYS[1])
  local hash = {}
  for i = 1, #whole, 2 do hash[whole[i]] = whole[i + 1] end
  for i, name in ipairs(names) do seen[i] = hash[name] or false end
else
  seen = redis.call('HMGET', KEYS[1], unpack(names))
end
local kept = once_found(seen[6])
if kept ~= nil then return kept end
local status = seen[1]
if not status and redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
local resume = ARGV[1] == 'resume'
local current = resume and tonumber(seen[2]) == tonumber(ARGV[2])
local takes = (not resume and status == 'running')
  or (current and (status == 'ready' or status == 'resuming'))
-- The new fence is written with the call's reply in one write.
local fence = (tonumber(seen[5]) or 0) + tonumber(ARGV[6])
if takes then
  if not resume then
    local reply = {'claimed', fence}
    redis.call('HSET', KEYS[1], unpack(with_once({F.fence, fence}, reply)))
    return reply
  end
  local t = redis_time()
  local reply = {status == 'resuming' and 'taken_over' or 'claimed', fence, t[1], t[2]}
  redis.call('HSET', KEYS[1], unpack(with_once({F.fence, fence, F.status, 'resuming'}, reply)))
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  live_by_outlive(KEYS[1], seen[4], tonumber(ARGV[3]) * 1000)  -- `home_index.lua`
  local details = cjson.encode({round = tonumber(ARGV[2]), fence = fence,
    taken_over = status == 'resuming', channel = seen[3],
    at = tonumber(t[1]) + tonumber(t[2]) / 1000000})
  redis.call('XADD', KEYS[2], '*', 'event', ARGV[5], 'run_id', ARGV[4], 'details', details)
  reply[#reply + 1] = whole
  return reply
end
if status == 'waiting' or status == 'finishing' then
  local reply = {status, fence}
  redis.call('HSET', KEYS[1], unpack(with_once({F.fence, fence}, reply)))
  return reply
end
if resume and not current then return {'stale'} end
return {status}
