-- semaphore_acquire.lua: take permits now, or join the FIFO queue. The uncontended
-- path is this one script, one round trip.
-- KEYS: see semaphore_common.lua
-- ARGV[2] permit id   ARGV[3] permits   ARGV[4] limit (0: the stored one)   ARGV[5] ttl ms
-- ARGV[6] owner   ARGV[7] wait ms (0 = try once)   ARGV[8] server process id
-- ARGV[9] liveness ms   ARGV[10] '1': the deprecated rule (--semaphore-limit-from-acquire),
-- under which the limit given is put in force, else '0'
-- Returns {status, ms, now_ms}:
--   ACQUIRE.ACQUIRED  ms = the permit's remaining TTL
--   ACQUIRE.BUSY      no room, not queued; ms = until the first holder expires (-1: none)
--   ACQUIRE.QUEUED    ms as for BUSY
-- or a refusal that changed nothing:
--   {LIMIT.MISMATCH, stored limit}       the limit given is not the stored one
--   {LIMIT.UNSET}                        limit 0, and no limit is stored
--   {LIMIT.BELOW_PERMITS, stored limit}  limit 0, and the stored one is below the permits
-- The stored limit is set by SetLimit (semaphore_set_limit.lua) or by the first Acquire
-- that finds none, and changed only by SetLimit (under the deprecated rule, by every
-- Acquire too: a lower one evicts nobody, a higher one admits waiters now).
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include semaphore_common.lua
local id, permits, limit, ttl, owner = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local wait, proc, liveness, from_acquire = tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9]), ARGV[10] == '1'
local now_ms, now_us = clock()

local expires = redis.call('ZSCORE', KEYS[1], id)
if expires then
  -- A retried call (reply lost) whose permits were already granted.
  return {ACQUIRE.ACQUIRED, tonumber(expires) - now_ms, now_ms}
end
local stored = stored_limit()
if limit == 0 then
  if stored == 0 then
    return {LIMIT.UNSET}
  elseif permits > stored then
    return {LIMIT.BELOW_PERMITS, stored}
  end
  limit = stored
elseif stored == 0 or (from_acquire and limit ~= stored) then
  store_acquired_limit(limit)
elseif limit ~= stored then
  return {LIMIT.MISMATCH, stored}
end
local held = grant_next(now_ms, sweep(now_ms))
if redis.call('ZCARD', KEYS[3]) == 0 and held + permits <= limit then
  grant(id, permits, ttl, owner, now_ms, held)
  return {ACQUIRE.ACQUIRED, ttl, now_ms}
end
if wait <= 0 then
  return {ACQUIRE.BUSY, next_expiry(KEYS[1], now_ms), now_ms}
end
enqueue(Q, id, now_ms, now_us, wait, proc, liveness, permits, ttl, owner)
keep_for(wait + liveness)
return {ACQUIRE.QUEUED, next_expiry(KEYS[1], now_ms), now_ms}
