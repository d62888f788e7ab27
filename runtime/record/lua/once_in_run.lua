-- The head of a script of the run's hash (KEYS[1]) that takes effect once per call
-- (`runtime.record.once.RunOnce`), its first fragment: the call's token is its last argument, taken off here, and
-- names the hash field that keeps the call's reply (`once:<token>`). The body reads that field
-- with its own first read of the hash and writes it with its own write, so the frame costs no
-- command: a copy of the call finds the reply there and returns it without running again.
-- A body with no effect to keep (refused, fenced off, no such run) keeps no reply: a copy runs
-- it again, to the same refusal. Where the body deletes the hash, it keeps its reply elsewhere
-- (`close.lua`: the tombstone).
--
-- ARGV
--   last the call's token, or '' for a call that keeps nothing (`ONCE` is false then)
local ONCE = table.remove(ARGV)
if ONCE == '' then ONCE = false else ONCE = F.once .. ONCE end
-- The reply a copy of this call returns, from what the body's read of `ONCE` found; nil: run.
local function once_found(kept)
  if ONCE and kept then return cmsgpack.unpack(kept) end
  return nil
end
-- `fields` (field, value, ...) with this call's `reply` kept beside them.
local function with_once(fields, reply)
  if ONCE then
    fields[#fields + 1] = ONCE
    fields[#fields + 1] = cmsgpack.pack(reply)
  end
  return fields
end
