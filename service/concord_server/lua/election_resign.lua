-- election_resign.lua: end a term and hand leadership to the next live candidate.
-- KEYS: see election_common.lua
-- ARGV[3] term
-- Returns HELD.HELD resigned; HELD.NOT_HELD the term is not the leader's.
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
redis.call('DEL', KEYS[1])
settle(now_ms, now_us)
return HELD.HELD
