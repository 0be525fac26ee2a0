-- rwlock_refresh.lua: reset a holder's TTL (an expired hold stays expired).
-- KEYS: see rwlock_common.lua
-- ARGV[3] lease   ARGV[4] ttl ms
-- Returns {HELD.HELD, fence, now_ms} refreshed; {HELD.NOT_HELD} the lease does not hold it.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include rwlock_common.lua
local now_ms, now_us = clock()
sweep(now_ms)
grant_next(now_ms, now_us)
if not redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  return {HELD.NOT_HELD}
end
local ttl = tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], 'XX', now_ms + ttl, ARGV[3])
keep_holders(ttl)
local _, fence = holder_info(ARGV[3])
return {HELD.HELD, fence, now_ms}
