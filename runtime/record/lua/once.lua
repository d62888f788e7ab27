-- The frame of every script that takes effect once per call (`runtime.record.once`): the
-- script's body goes in place of the line that reads only "-- BODY", inside a function whose
-- reply is kept under the call's token. A copy of the call (a retry of the same token) finds
-- the reply and returns it without running the body again.
--
-- KEYS
--   1... the body's own keys
--   last the call's token (`Keys.once`: `once:<token>` in the shard of the first key), taken
--        off before the body reads KEYS
-- ARGV
--   1... the body's own arguments
--   last how long the reply is kept, in seconds (`ONCE_SECONDS`), taken off likewise
-- Returns the body's reply, the first time and to every copy.
local once_key = table.remove(KEYS)
local once_ttl = table.remove(ARGV)
local seen = redis.call('GET', once_key)
if seen then return cmsgpack.unpack(seen) end
local reply = (function()
-- BODY
end)()
redis.call('SET', once_key, cmsgpack.pack(reply), 'EX', once_ttl)
return reply
