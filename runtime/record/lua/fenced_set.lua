-- Fields of the run's hash written, unless a later delivery has claimed the run. With an audit
-- entry (the step the write records), the entry is appended in the same step.
--
-- KEYS
--   1 run: the run's hash
--   2 audit: the audit stream of the run's shard
-- ARGV
--   1 fence: the writer's fence ('' for writes that any holder may make)
--   2 entry: the audit entry (JSON list of its fields, `AuditTrail.entry`), or ''
--   3... fields: field, value, field, value, ...
-- Returns 1 written, 0 no such run, -1 fenced off.
if ARGV[1] ~= '' then
  local fence = redis.call('HGET', KEYS[1], F.fence)
  if fence ~= ARGV[1] then
    if not fence and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
    return -1
  end
elseif redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
if ARGV[2] ~= '' then redis.call('XADD', KEYS[2], '*', unpack(cjson.decode(ARGV[2]))) end
return 1
