-- A tool call's outcome, recorded once (the first record wins) while the run exists, with its
-- audit entry (`executed`) in the same step. The field is the call's own take-once mark: a copy
-- of the call, or a later attempt's, finds the outcome there and appends nothing. When the run's
-- record is gone the entry is still appended (the tool ran), once per call token (`once`).
--
-- KEYS
--   1 run: the run's hash
--   2 audit: the audit stream of the run's shard
--   3 once: the call's token key, read only when the run is gone (`Keys.once`)
-- ARGV
--   1 field: the field (`journal:<call id>`)
--   2 outcome: the recorded outcome (`runtime.journal.invoker`)
--   3 entry: the audit entry (JSON list of its fields), or ''
--   4 once_seconds: how long the token key is kept (`ONCE_SECONDS`)
-- Returns 1 recorded, 0 recorded before or no such run.
local function audit()
  if ARGV[3] ~= '' then redis.call('XADD', KEYS[2], '*', unpack(cjson.decode(ARGV[3]))) end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  local put = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
  if put == 1 then audit() end
  return put
end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
audit()
redis.call('SET', KEYS[3], '1', 'EX', ARGV[4])
return 0
