-- A tool call's outcome, recorded once (the first record wins) while the run exists; its audit
-- entry (`executed`) in the same step, whether or not the run's record is still there: the tool
-- ran.
--
-- KEYS
--   1 run: the run's hash
--   2 audit: the audit stream of the run's shard
-- ARGV
--   1 field: the field (`journal:<call id>`)
--   2 outcome: the recorded outcome (`runtime.journal.invoker`)
--   3 entry: the audit entry (JSON list of its fields), or ''
-- Returns 1 recorded, 0 recorded before or no such run.
local put = 0
if redis.call('EXISTS', KEYS[1]) == 1 then put = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) end
if ARGV[3] ~= '' then redis.call('XADD', KEYS[2], '*', unpack(cjson.decode(ARGV[3]))) end
return put
