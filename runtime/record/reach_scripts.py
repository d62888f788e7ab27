"""The run record's scripts by which a call reaches beyond its thread: recording copies of its
card, and widening its gate when it is escalated.

Part of `runtime.record.layout` (which owns the layout, prepends the field names as the Lua table
`F` and registers these scripts); kept apart only for size.
"""

from __future__ import annotations

# Copies of a card posted elsewhere join the call's copies (the decision script accepts a
# decision from any of them). A copy posted after the decision is told so, to be redrawn.
# KEYS: run. ARGV: approval id, copies (JSON list of {channel, ts}).
# Returns {'gone'} (no such run or call), {'open'}, or {'decided', decision JSON}.
ADD_COPIES = """
local run = KEYS[1]
local aid = ARGV[1]
if redis.call('HEXISTS', run, F.deadline .. aid) == 0 then return {'gone'} end
local copies = cjson.decode(redis.call('HGET', run, F.copies .. aid) or '[]')
for _, copy in ipairs(cjson.decode(ARGV[2])) do table.insert(copies, copy) end
redis.call('HSET', run, F.copies .. aid, cjson.encode(copies))
local decision = redis.call('HGET', run, F.decision .. aid)
if decision then return {'decided', decision} end
return {'open'}
"""

# Escalation widens a still-open call's gate: compare-and-set on the gate as the caller read it
# (JSON stays Python's to write: Lua's cjson would turn an empty list into an object), with the
# audit entry in the same step.
# KEYS: run, audit. ARGV: approval id, gate as read, widened gate, run id, event, details JSON.
# Returns 'escalated', 'already' (the gate is the widened one), 'changed' (read it again),
# 'decided', 'closed' (the run no longer waits) or 'gone'.
ESCALATE = """
local run = KEYS[1]
local aid = ARGV[1]
if redis.call('HEXISTS', run, F.deadline .. aid) == 0 then return 'gone' end
if redis.call('HEXISTS', run, F.decision .. aid) == 1 then return 'decided' end
if redis.call('HGET', run, F.status) ~= 'waiting' then return 'closed' end
local gate = redis.call('HGET', run, F.gate .. aid)
if gate == ARGV[3] then return 'already' end
if gate ~= ARGV[2] then return 'changed' end
redis.call('HSET', run, F.gate .. aid, ARGV[3])
local details = cjson.decode(ARGV[6])
local t = redis.call('TIME')
details['at'] = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('XADD', KEYS[2], '*', 'event', ARGV[5], 'run_id', ARGV[4], 'details',
  cjson.encode(details))
return 'escalated'
"""
