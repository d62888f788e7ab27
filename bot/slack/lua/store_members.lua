-- A group's members as Slack gave them, cached unless the group changed (Slack said so, and
-- the generation grew) while we asked: an answer from before the change must not stay.
--
-- KEYS
--   1 generation: the group's generation (a counter)
--   2 members: the group's cached members
-- ARGV
--   1 generation_read: the generation read before asking Slack
--   2 found: the members (JSON list)
--   3 ttl_seconds: the cache's TTL in seconds
-- Returns 1 cached, 0 not (the group changed meanwhile).
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 1
