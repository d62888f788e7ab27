-- A tool call's recorded outcome, or its start mark, written back to a primary that a failover
-- promoted without it (`runtime.failover.calls`): only on the primary the caller means, only
-- while the run exists, never over what is there. An outcome written back comes with its audit
-- entry (`executed`): the tool ran, and the new primary's trail said nothing of it.
--
-- KEYS
--   1 run: the run's hash
--   2 audit: the audit stream of the run's shard
-- ARGV
--   1 replid: the replication id of the primary the caller means (`INFO replication`), or '' for
--     whichever primary this is
--   2 call_id: the tool call's id
--   3 outcome: the recorded outcome (`runtime.journal.invoker`), or '' (a start mark only)
--   4 entry: the outcome's audit entry (JSON list of its fields, `AuditTrail.entry`), or ''
--   5 started_round: the round the call started in (its start mark), or ''
-- Returns {status, offset}: status 'moved' (this is another primary: nothing written), 'gone'
-- (no such run here), 'there' (recorded or marked already) or 'restored'; offset this primary's
-- replication offset before the script.
local info = redis.call('INFO', 'replication')
local replid = string.match(info, 'master_replid:(%x+)')
local offset = tonumber(string.match(info, 'master_repl_offset:(%d+)')) or 0
if (ARGV[1] ~= '' and replid ~= ARGV[1]) or string.match(info, 'role:(%a+)') ~= 'master' then
  return {'moved', offset}
end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone', offset} end
local journal, started = JOURNAL .. ARGV[2], STARTED .. ARGV[2]
if ARGV[3] ~= '' then
  if redis.call('HSETNX', KEYS[1], journal, ARGV[3]) == 0 then return {'there', offset} end
  if ARGV[4] ~= '' then redis.call('XADD', KEYS[2], '*', unpack(cjson.decode(ARGV[4]))) end
  return {'restored', offset}
end
if ARGV[5] == '' or redis.call('HEXISTS', KEYS[1], journal) == 1 then
  return {'there', offset}
end
local mark = redis.call('HGET', KEYS[1], started)
if mark and mark ~= '' then return {'there', offset} end
redis.call('HSET', KEYS[1], started, ARGV[5])
return {'restored', offset}
