-- Escalation widens a still-open call's gate: compare-and-set on the gate as the caller read it
-- (JSON stays Python's to write: Lua's cjson would turn an empty list into an object), with the
-- audit entry in the same step.
--
-- KEYS
--   1 run: the run's hash
--   2 audit: the audit stream of the run's shard
-- ARGV
--   1 approval_id: the approval id
--   2 read_gate: the gate as the caller read it (JSON `CallGate`)
--   3 gate: the widened gate (JSON)
--   4 run_id: the run id
--   5 event: the audit event's name
--   6 details: the audit entry's details (JSON object; the time is added here)
-- Returns 'escalated', 'already' (the gate is the widened one), 'changed' (read it again),
-- 'decided', 'closed' (the run no longer waits) or 'gone'.
local run = KEYS[1]
local aid = ARGV[1]
if redis.call('HEXISTS', run, F.deadline .. aid) == 0 then return 'gone' end
if redis.call('HEXISTS', run, F.decision .. aid) == 1 then return 'decided' end
if redis.call('HGET', run, F.status) ~= 'waiting' then return 'closed' end
local gate = redis.call('HGET', run, F.gate .. aid)
if gate == ARGV[3] then return 'already' end
if gate ~= ARGV[2] then return 'changed' end
redis.call('HSET', run, F.gate .. aid, ARGV[3])
home_index(run, aid)  -- the people it adds (`home_index.lua`)
local details = cjson.decode(ARGV[6])
local t = redis.call('TIME')
details['at'] = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('XADD', KEYS[2], '*', 'event', ARGV[5], 'run_id', ARGV[4], 'details',
  cjson.encode(details))
return 'escalated'
