-- A person ends a grant early, in its own channel; the next call it would have covered asks.
--
-- KEYS
--   1 grant: the grant's hash
--   2 channel_grants: the channel's grants (a sorted set, in the grant's shard)
--   3 audit: the audit stream of the grant's shard
-- ARGV
--   1 grant_id: the grant id
--   2 channel: the channel the person revokes it in (another channel's grant is not touched)
--   3 user_id: the person's user id
--   4 user_name: the person's name ('' unknown)
--   5 event: the audit event's name (`revoked`)
--   6 team: the person's team ('' unknown)
-- Returns false (no such grant in this channel), or {the grant JSON, uses}.
local raw = redis.call('HGET', KEYS[1], 'grant')
if not raw then return false end
local grant = cjson.decode(raw)
if grant['channel'] ~= ARGV[2] then return false end
local uses = redis.call('HGET', KEYS[1], 'uses') or '0'
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local t = redis.call('TIME')
local details = cjson.encode({grant_id = ARGV[1], user_id = ARGV[3], user_name = ARGV[4],
  channel = grant['channel'], agent = grant['agent'], tool = grant['tool'],
  granted_by = grant['user_id'], digest = grant['digest'], uses = tonumber(uses),
  at = tonumber(t[1]) + tonumber(t[2]) / 1000000, team = ARGV[6] ~= '' and ARGV[6] or nil})
redis.call('XADD', KEYS[3], '*', 'event', ARGV[5], 'run_id', grant['run_id'], 'details', details)
return {raw, uses}
