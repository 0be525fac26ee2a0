-- semaphore_refresh.lua: reset a holder's TTL (an expired permit stays expired).
-- KEYS: see semaphore_common.lua
-- ARGV[2] permit id   ARGV[3] ttl ms
-- Returns {HELD.HELD, expires_at_ms} refreshed; {HELD.NOT_HELD} the permit is not held.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include semaphore_common.lua
local now_ms = clock()
grant_next(now_ms, sweep(now_ms))
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return {HELD.NOT_HELD}
end
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], 'XX', now_ms + ttl, ARGV[2])
keep_for(ttl)
return {HELD.HELD, now_ms + ttl}
