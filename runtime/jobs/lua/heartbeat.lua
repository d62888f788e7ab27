-- Reset the idle time only of entries this consumer still owns: a plain XCLAIM would take back
-- a job that another worker already took over.
--
-- KEYS
--   1 stream: the job stream
-- ARGV
--   1 group: the consumer group
--   2 consumer: this consumer's name
--   3... entries: the entry ids it believes it holds
-- Returns how many of them it still held.
local kept = 0
for i = 3, #ARGV do
  local row = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if row[1] and row[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    kept = kept + 1
  end
end
return kept
