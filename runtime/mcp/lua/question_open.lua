-- An MCP server's question during a call (`runtime.mcp.questions`), stored for the people who
-- may answer it and for the worker that waits; its `elicited` audit entry in the same step.
-- The deadline is Redis's time plus the wait, so that every process judges it by one clock.
--
-- KEYS
--   1 question: the question's hash
--   2 audit: the audit stream of the run's shard
-- ARGV
--   1 question_json: the question (JSON, `Question`)
--   2 wait_seconds: how long it waits for an answer (`ELICITATION_TIMEOUT_SECONDS`)
--   3 keep_seconds: how long the hash is kept (longer: a late click is told it is over)
--   4 entry: the audit entry (JSON list of its fields)
-- Returns the deadline (epoch seconds), the first time and to every copy.
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HGET', KEYS[1], 'deadline') end
local deadline = tonumber(redis.call('TIME')[1]) + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'question', ARGV[1], 'state', 'open', 'deadline', deadline)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('XADD', KEYS[2], '*', unpack(cjson.decode(ARGV[4])))
return tostring(deadline)
