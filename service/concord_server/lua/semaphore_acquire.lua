-- semaphore_acquire.lua: take permits now, or join the FIFO queue. The uncontended
-- path is this one script, one round trip.
-- KEYS: see semaphore_common.lua
-- ARGV[2] permit id   ARGV[3] permits   ARGV[4] limit   ARGV[5] ttl ms   ARGV[6] owner
-- ARGV[7] wait ms (0 = try once)   ARGV[8] server process id   ARGV[9] liveness ms
-- Returns {status, ms, now_ms}:
--   ACQUIRE.ACQUIRED  ms = the permit's remaining TTL
--   ACQUIRE.BUSY      no room, not queued; ms = until the first holder expires (-1: none)
--   ACQUIRE.QUEUED    ms as for BUSY
-- The limit passed by the latest Acquire is the one in force: a lower one evicts
-- nobody (grants wait until the held permits fit), a higher one admits waiters now.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include semaphore_common.lua
local id, permits, limit, ttl, owner = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local wait, proc, liveness = tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9])
local now_ms, now_us = clock()

local expires = redis.call('ZSCORE', KEYS[1], id)
if expires then
  -- A retried call (reply lost) whose permits were already granted.
  return {ACQUIRE.ACQUIRED, tonumber(expires) - now_ms, now_ms}
end
redis.call('HSET', KEYS[6], 'limit', limit)
local held = grant_next(now_ms, sweep(now_ms))
if redis.call('ZCARD', KEYS[3]) == 0 and held + permits <= limit then
  grant(id, permits, ttl, owner, now_ms, held)
  return {ACQUIRE.ACQUIRED, ttl, now_ms}
end
if wait <= 0 then
  return {ACQUIRE.BUSY, next_expiry(now_ms), now_ms}
end
enqueue(Q, id, now_ms, now_us, wait, proc, liveness, permits, ttl, owner)
keep_for(wait + liveness)
return {ACQUIRE.QUEUED, next_expiry(now_ms), now_ms}
