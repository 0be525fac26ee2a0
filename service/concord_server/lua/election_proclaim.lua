-- election_proclaim.lua: replace the leader's value, and record the change.
-- KEYS: see election_common.lua
-- ARGV[3] term   ARGV[4] value
-- Returns HELD.HELD proclaimed; HELD.NOT_HELD the term is not the leader's.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
--! include election_common.lua
local now_ms, now_us = clock()
if not leads(ARGV[3]) then
  settle(now_ms, now_us)
  return HELD.NOT_HELD
end
-- The same value again (a retried call whose reply was lost) is no change to record.
if redis.call('HGET', KEYS[1], 'value') == ARGV[4] then
  return HELD.HELD
end
redis.call('HSET', KEYS[1], 'value', ARGV[4])
record(now_ms, tonumber(ARGV[3]), redis.call('HGET', KEYS[1], 'owner'), ARGV[4])
return HELD.HELD
