-- A reply's run becomes the thread's last run, if the run the web saw there still is: of two
-- replies racing in one thread, exactly one takes the turn.
--
-- KEYS
--   1 thread: the thread (`Keys.thread`): JSON {run_id, agent, ...}
-- ARGV
--   1 last_run_id: the run id the web read as the thread's last run, and found no longer busy
--   2 value: the reply's run, as the thread's new value (JSON, its `run_id` the reply's)
--   3 run_id: the reply's run id
--   4 ttl_seconds: the time to live, in seconds
-- Returns 1 when the reply's run is now the thread's last (also when this very reply took it
-- already: redis-py sends a script again after a timeout), 0 when another run took the turn or
-- the thread was forgotten meanwhile.
local current = redis.call('GET', KEYS[1])
if not current then
  return 0
end
local ok, last = pcall(cjson.decode, current)
if not ok or type(last) ~= 'table' then
  return 0
end
if last['run_id'] == ARGV[3] then
  return 1
end
if last['run_id'] ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', tonumber(ARGV[4]))
return 1
