-- One `views.publish` of a Home tab, if the workspace's rate allows it within ARGV[3] ms (shared
-- by every web process): a token bucket kept as the time its next token is due (GCRA), refilled
-- at one per ARGV[1] ms and holding ARGV[2] tokens, and held shut while a 429's Retry-After
-- lasts. A token due within ARGV[3] ms is taken now, for then: the caller sleeps and publishes
-- without asking again (one call per publish while paced, not two).
--
-- KEYS
--   1 rate: when the bucket is next full enough, epoch ms (`HomeKeys.publish_rate`)
--   2 pause: exists while Slack asked for a pause (`HomeKeys.publish_pause`)
-- ARGV
--   1 interval_ms: ms between publishes
--   2 burst: publishes allowed at once (the bucket's size)
--   3 ahead_ms: the longest wait, ms, a token is taken ahead for
-- Returns {1, ms}: a token taken, publish in ms (0: now); or {0, ms}: none, ask again in ms.
local paused = redis.call('PTTL', KEYS[2])
if paused > 0 then return {0, paused} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local due = tonumber(redis.call('GET', KEYS[1]) or now)
if due < now then due = now end
local allowed_at = due - interval * (tonumber(ARGV[2]) - 1)
local wait = math.max(0, math.ceil(allowed_at - now))
if wait > tonumber(ARGV[3]) then return {0, wait} end
due = due + interval
redis.call('SET', KEYS[1], tostring(due), 'PX', math.ceil(due - now) + 1000)
return {1, wait}
