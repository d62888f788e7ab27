-- A job joins the stream unless one with its id was enqueued recently (its marker is set). A
-- missing stream (an emptied Redis) is made again with its group, from id 0 so that this job is
-- read: an XADD alone would make a stream no worker can read (NOGROUP), so the job is added
-- with NOMKSTREAM, which adds nothing to a missing stream (one command where the stream is
-- there, as it nearly always is). JOB_GROUP comes with the script's constants.
--
-- KEYS
--   1 stream: the job stream of the shard (of the job's version: `Shard.job_streams`)
--   2 marker: the job id's marker (`Shard.job_marker`)
--   3 other: the shard's other job stream, made with the first when missing (one emptied Redis, one
--     stream made again as far as anyone reading it can tell)
-- ARGV
--   1 job: the job (JSON)
--   2 marker_ttl: the marker's TTL in seconds
-- Returns {the entry id, or false for a duplicate; 1 if the stream had to be made, else 0}.
-- The stream made again with its group, and the other one if it is missing too.
local function make(stream, other)
  redis.call('XGROUP', 'CREATE', stream, JOB_GROUP, '0', 'MKSTREAM')
  if redis.call('EXISTS', other) == 0 then
    redis.call('XGROUP', 'CREATE', other, JOB_GROUP, '0', 'MKSTREAM')
  end
end
local function enqueue(stream, marker, job, marker_ttl, other)
  if not redis.call('SET', marker, '1', 'NX', 'EX', marker_ttl) then
    -- A duplicate: nothing joins, but a missing stream is made all the same.
    if redis.call('EXISTS', stream) == 1 then return {false, 0} end
    make(stream, other)
    return {false, 1}
  end
  local id = redis.call('XADD', stream, 'NOMKSTREAM', '*', 'job', job)
  if id then return {id, 0} end
  make(stream, other)
  return {redis.call('XADD', stream, '*', 'job', job), 1}
end
return enqueue(KEYS[1], KEYS[2], ARGV[1], ARGV[2], KEYS[3])
