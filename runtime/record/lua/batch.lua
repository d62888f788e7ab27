-- The batch script's second half: it closes `decide_one` (opened in `batch_open.lua`, whose
-- body is `decide.lua`) and runs it per call, checks first, then decisions.
--
-- KEYS and ARGV: the batch's, as `batch_open.lua` lists them; each call's own decision-script
-- ARGV is built here (`argv`), its KEYS are the batch's 1 to 5.
end
local calls = cjson.decode(ARGV[1])
local function argv(call, mode)
  return {call['aid'], ARGV[2], ARGV[3], mode, call['member'], ARGV[4], call['groups'], ARGV[5],
    ARGV[6], ARGV[7], call['digest']}
end
-- A quorum or a typed confirmation asks each call on its own: never in a batch.
local single = {}
for _, call in ipairs(calls) do
  local raw = redis.call('HGET', KEYS[1], F.gate .. call['aid'])
  local ok, gate = pcall(cjson.decode, raw or '')
  if ok and type(gate) == 'table' and ((tonumber(gate['quorum']) or 1) > 1
      or type(gate['confirm']) == 'string') then
    table.insert(single, call['aid'])
  end
end
if #single > 0 then return {'not_offered', cjson.encode(single)} end
-- First every call as a check (who may decide, self-approval, the seen digest, still open):
-- one refusal and nothing is decided.
local refused = {}
for _, call in ipairs(calls) do
  local reply = decide_one(KEYS, argv(call, 'check'))
  if reply[1] ~= 'open' then table.insert(refused, {call['aid'], reply[1]}) end
end
if #refused > 0 then return {'refused', cjson.encode(refused)} end
local done = {}
for _, call in ipairs(calls) do
  local reply = decide_one(KEYS, argv(call, 'decide'))
  table.insert(done, {call['aid'], unpack(reply)})
end
return {'recorded', cjson.encode(done)}
