-- Drop consumers with no pending jobs that have not read for longer than ARGV[2] ms; atomic, so
-- a consumer cannot pick up a job between the check and the delete (which would drop the job
-- from the pending list).
--
-- KEYS
--   1 stream: the job stream
-- ARGV
--   1 group: the consumer group
--   2 min_idle_ms: the idle time in milliseconds beyond which a consumer with nothing pending goes
-- Returns the names of the consumers dropped.
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
