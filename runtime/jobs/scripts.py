"""The job queue's Lua scripts (`runtime.jobs.queue`): enqueue, the heartbeat, forgetting idle
consumers."""

from __future__ import annotations

from runtime.db.keys import JOB_GROUP

# Shared with other scripts that enqueue as part of a larger atomic step. A missing stream (an
# emptied Redis) is made again with its group, from id 0 so that this job is read: an XADD alone
# would make a stream no worker can read (NOGROUP). Returns the entry id (false for a duplicate)
# and whether the stream had to be made.
ENQUEUE_LUA = """
local function enqueue(stream, marker, job, marker_ttl)
  local made = 0
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XGROUP', 'CREATE', stream, '{group}', '0', 'MKSTREAM')
    made = 1
  end
  if redis.call('SET', marker, '1', 'NX', 'EX', marker_ttl) then
    return {redis.call('XADD', stream, '*', 'job', job), made}
  end
  return {false, made}
end
""".replace("{group}", JOB_GROUP)

ENQUEUE_SCRIPT = ENQUEUE_LUA + "return enqueue(KEYS[1], KEYS[2], ARGV[1], ARGV[2])"

STREAM_LOST = (
    "the job stream %s was lost (Redis was emptied, or restarted without its data): made it "
    "again with its consumer group; jobs and runs stored before are gone"
)

# Reset the idle time only of entries this consumer still owns: a plain XCLAIM would take back
# a job that another worker already took over.
HEARTBEAT_SCRIPT = """
local kept = 0
for i = 3, #ARGV do
  local row = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if row[1] and row[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    kept = kept + 1
  end
end
return kept
"""


# Drop consumers with no pending jobs that have not read for longer than ARGV[2] ms; atomic, so
# a consumer cannot pick up a job between the check and the delete (which would drop the job
# from the pending list). Returns their names.
FORGET_IDLE_CONSUMERS_SCRIPT = """
local gone = {}
for _, row in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local consumer = {}
  for i = 1, #row, 2 do consumer[row[i]] = row[i + 1] end
  if consumer['pending'] == 0 and consumer['idle'] > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], consumer['name'])
    table.insert(gone, consumer['name'])
  end
end
return gone
"""
