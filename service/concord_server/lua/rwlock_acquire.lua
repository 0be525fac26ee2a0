-- rwlock_acquire.lua: take a read-write lock in a mode, or join its FIFO queue. The
-- uncontended path (nobody queued, compatible holders) is this one script, one round trip.
-- KEYS: see rwlock_common.lua
-- ARGV[3] lease   ARGV[4] mode (1 read, 2 write)   ARGV[5] ttl ms   ARGV[6] owner
-- ARGV[7] wait ms (0 = try once)   ARGV[8] server process id   ARGV[9] liveness ms
-- Returns {status, fence, ms, now_ms}:
--   ACQUIRE.ACQUIRED   ms = the hold's remaining TTL (a retried call whose lease already
--                      holds gets its own fence and remaining TTL back, whatever the mode)
--   ACQUIRE.BUSY       not compatible (or others queued first), not queued; fence 0;
--                      ms = until the first holder expires (-1: none)
--   ACQUIRE.QUEUED     ms as for BUSY (when to look again)
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include rwlock_common.lua
local lease, want, ttl, owner = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local wait, proc, liveness = tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9])
local now_ms, now_us = clock()

sweep(now_ms)
local expires = redis.call('ZSCORE', KEYS[1], lease)
if expires then
  -- A retried call (reply lost) whose lease already holds the lock.
  local _, fence = holder_info(lease)
  return {ACQUIRE.ACQUIRED, fence, tonumber(expires) - now_ms, now_ms}
end
-- Holders that expired may let the queue's head in first: no barging past waiters.
grant_next(now_ms, now_us)
if redis.call('ZCARD', KEYS[3]) == 0 and compatible(held_mode(), want) then
  return {ACQUIRE.ACQUIRED, grant(lease, want, ttl, owner, now_ms, now_us), ttl, now_ms}
end
if wait <= 0 then
  return {ACQUIRE.BUSY, 0, next_expiry(KEYS[1], now_ms), now_ms}
end
enqueue(Q, lease, now_ms, now_us, wait, proc, liveness, want, ttl, owner)
keep_queue(wait + liveness)
return {ACQUIRE.QUEUED, 0, next_expiry(KEYS[1], now_ms), now_ms}
