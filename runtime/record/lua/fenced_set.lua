-- Fields of the run's hash written, unless a later delivery has claimed the run. With an audit
-- entry (the step the write records), the entry is appended in the same step, and the call
-- takes effect once (`once_in_run.lua`); without one it keeps nothing: writing the same fields
-- under the same fence again is the same hash.
--
-- KEYS
--   1 run: the run's hash
--   2 audit: the audit stream of the run's shard
-- ARGV
--   1 fence: the writer's fence ('' for writes that any holder may make)
--   2 entry: the audit entry (JSON list of its fields), or ''
--   3... fields: field, value, field, value, ...
-- Returns 1 written, 0 no such run, -1 fenced off.
local seen = redis.call('HMGET', KEYS[1], F.fence, ONCE or F.fence)
local kept = once_found(seen[2])
if kept ~= nil then return kept end
if not seen[1] and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '' and seen[1] ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[1], unpack(with_once({unpack(ARGV, 3)}, 1)))
if ARGV[2] ~= '' then redis.call('XADD', KEYS[2], '*', unpack(cjson.decode(ARGV[2]))) end
return 1
