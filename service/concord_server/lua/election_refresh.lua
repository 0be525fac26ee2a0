-- election_refresh.lua: reset the TTL of a leadership.
-- KEYS: see election_common.lua
-- ARGV[3] term   ARGV[4] ttl ms
-- Returns {HELD.HELD, now_ms} refreshed; {HELD.NOT_HELD} the term is not the leader's.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
--! include election_common.lua
local now_ms, now_us = clock()
if not leads(ARGV[3]) then
  settle(now_ms, now_us)
  return {HELD.NOT_HELD}
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {HELD.HELD, now_ms}
