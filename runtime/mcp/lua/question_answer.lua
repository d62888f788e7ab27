-- An answer to an MCP server's question: MCP's `accept`, `decline` or `cancel`. The first one
-- counts; a person must be allowed to answer (the requester, or the server's rule's
-- `elicitation_responders`), answer before the deadline (Redis's time), and while a worker
-- still waits (its `waiter` key); the worker answers `cancel` itself when the time is up or the
-- call ended. The answer is pushed to the list the worker pops, and audited, in the same step.
--
-- KEYS
--   1 question: the question's hash
--   2 answers: the list the waiting worker pops the answer from
--   3 waiter: exists while a worker waits for the answer
--   4 audit: the audit stream of the run's shard
-- ARGV
--   1 by: who answers: a person's user id, or `timeout` or `ended` (the worker)
--   2 person: `1` for a person (checked), `0` for the worker
--   3 groups: the responders' user groups the person is in (JSON list)
--   4 action: `accept`, `decline` or `cancel`
--   5 content: the values (JSON object), or ''
--   6 check: `1` to check only whether the person may answer now, recording nothing
--   7 entry: the audit entry (JSON list of its fields), or '' with `check`
--   8 keep_seconds: how long the answers list is kept
-- Returns {'gone'}, {'answered_before', state, by}, {'ended'}, {'expired'}, {'not_allowed'},
-- {'may'} (with `check`) or {'answered'}.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'open' then
  return {'answered_before', state, redis.call('HGET', KEYS[1], 'by') or ''}
end
if ARGV[2] == '1' then
  if redis.call('EXISTS', KEYS[3]) == 0 then return {'ended'} end
  local deadline = tonumber(redis.call('HGET', KEYS[1], 'deadline'))
  if tonumber(redis.call('TIME')[1]) >= deadline then return {'expired'} end
  local question = cjson.decode(redis.call('HGET', KEYS[1], 'question'))
  local user = ARGV[1]
  local allowed = false
  local responders = question['responders']
  if #responders == 0 then
    allowed = user == question['requester']
  else
    local groups = cjson.decode(ARGV[3])
    for _, principal in ipairs(responders) do
      if principal == user then allowed = true end
      for _, group in ipairs(groups) do
        if principal == group then allowed = true end
      end
    end
  end
  if not allowed then return {'not_allowed'} end
end
if ARGV[6] == '1' then return {'may'} end
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'by', ARGV[1], 'content', ARGV[5])
redis.call('RPUSH', KEYS[2], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[8])
redis.call('XADD', KEYS[4], '*', unpack(cjson.decode(ARGV[7])))
return {'answered'}
