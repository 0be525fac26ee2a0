-- lock_refresh.lua: reset the TTL of a held lock.
-- KEYS: see lock_common.lua
-- ARGV[3] lease   ARGV[4] ttl ms
-- Returns {HELD.HELD, fence, now_ms} refreshed; {HELD.NOT_HELD} the lease does not hold the lock.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[3] then
  return {HELD.NOT_HELD}
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local now_ms = clock()
return {HELD.HELD, tonumber(redis.call('HGET', KEYS[1], 'fence')), now_ms}
