-- A grant covers one more call: atomically checks it still exists and has not ended (Redis's
-- clock), counts the use and writes `grant_used`. A revoked grant is gone: the next call asks.
-- A call the grant already covered (a job redelivered after its worker died between the use and
-- the tool, replaying the same model turn) is answered as then, counted and audited once: its
-- mark `used:<run_id>:<call_id>` lives in the grant's hash, and ends with it.
--
-- KEYS
--   1 grant: the grant's hash (`grant:<id>`)
--   2 audit: the audit stream of its shard
-- ARGV
--   1 run_id: the run id of the call it covers
--   2 details: the audit entry's details (JSON object; the grant's own are added here)
--   3 event: the audit event's name (`grant_used`)
--   4 call_id: the call it covers, with run_id its mark
-- Returns false (gone or ended), or {the grant JSON, uses so far}.
local mark = 'used:' .. ARGV[1] .. ':' .. ARGV[4]
local found = redis.call('HMGET', KEYS[1], 'grant', mark)
local raw = found[1]
if not raw then return false end
if found[2] then return {raw, tonumber(found[2])} end
local grant = cjson.decode(raw)
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if now >= tonumber(grant['ends_at']) then return false end
local uses = redis.call('HINCRBY', KEYS[1], 'uses', 1)
redis.call('HSET', KEYS[1], mark, uses)
local details = cjson.decode(ARGV[2])
details['grant_id'] = grant['id']
details['user_id'] = grant['user_id']
details['user_name'] = grant['user_name']
details['ends_at'] = grant['ends_at']
details['uses'] = uses
details['at'] = now
local encoded = cjson.encode(details)
redis.call('XADD', KEYS[2], '*', 'event', ARGV[3], 'run_id', ARGV[1], 'details', encoded)
return {raw, uses}
