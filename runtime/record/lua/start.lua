-- A tool call about to run (`runtime.journal.invoker`): its journal entry, the fence, the run's
-- stop mark and the call's start mark read, and, when the call may run, its start mark written,
-- with the model turns not journaled yet (`runtime.record.turns`), all in one step. A call
-- recorded before is replayed, not run; one that started without an outcome may have run, and
-- does not run again unless a person said to run it again (a mark of an earlier round than
-- theirs: one of their round is a start of the run they allowed) or its tool is safe to repeat. The mark takes effect once (`once_in_run.lua`): a copy
-- of the call answers 'marked' instead of finding its own mark and calling the call lost.
--
-- KEYS
--   1 run: the run's hash
-- ARGV
--   1 fence: the delivery's fence
--   2 call_id: the tool call's id
--   3 round: the run's round being worked on (the mark holds it)
--   4 run_again: '1' when a person said to run the call again, else ''
--   5 repeats: '1' when the call may run again whatever its mark (a tool safe to repeat, an
--     agent tool whose inner run resumes), else ''
--   6 stopping: '1' when this worker heard the run was stopped, else ''
--   7 held: '1' when this worker remembers recording the call's outcome (a failover may have
--     lost it: `runtime.failover.calls`), else ''
--   8... turns: field, value, ... of the model turns written with the mark
-- Returns {'recorded', outcome}, {'missing'} (held, and not in the hash: nothing marked),
-- {'fenced'} (a later delivery holds the run, or it is gone), {'stopped', stop mark},
-- {'stopping'}, {'lost'}, or {'marked'}.
local seen = redis.call('HMGET', KEYS[1], JOURNAL .. ARGV[2], F.fence, F.stopped,
  STARTED .. ARGV[2], ONCE or F.fence)
local kept = once_found(seen[5])
if kept ~= nil then return kept end
if seen[1] then return {'recorded', seen[1]} end
if ARGV[7] == '1' then return {'missing'} end
if seen[2] ~= ARGV[1] then return {'fenced'} end
if seen[3] then return {'stopped', seen[3]} end
if ARGV[6] == '1' then return {'stopping'} end
-- A mark taken back is '' (`CallStarts.not_running`): no mark.
local started = tonumber(seen[4] or '')
if started and ARGV[5] ~= '1' and not (ARGV[4] == '1' and started < tonumber(ARGV[3])) then
  return {'lost'}
end
local fields = {STARTED .. ARGV[2], ARGV[3]}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(with_once(fields, {'marked'})))
return {'marked'}
