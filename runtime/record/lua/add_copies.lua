-- Copies of a card posted elsewhere join the call's copies (the decision script accepts a
-- decision from any of them). A copy posted after the decision is told so, to be redrawn.
--
-- KEYS
--   1 run: the run's hash
-- ARGV
--   1 approval_id: the approval id
--   2 copies: the copies (JSON list of {channel, ts})
-- Returns {'gone'} (no such run or call), {'open'}, or {'decided', decision JSON}.
local run = KEYS[1]
local aid = ARGV[1]
if redis.call('HEXISTS', run, F.deadline .. aid) == 0 then return {'gone'} end
local copies = cjson.decode(redis.call('HGET', run, F.copies .. aid) or '[]')
for _, copy in ipairs(cjson.decode(ARGV[2])) do table.insert(copies, copy) end
redis.call('HSET', run, F.copies .. aid, cjson.encode(copies))
local decision = redis.call('HGET', run, F.decision .. aid)
if decision then return {'decided', decision} end
home_index(run, aid)  -- a call anyone may decide is listed to the copy's channel too
return {'open'}
