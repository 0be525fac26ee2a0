-- lock_acquire.lua: take the lock, or join its FIFO queue. The uncontended path is
-- this one script, one round trip.
-- KEYS: see lock_common.lua
-- ARGV[3] lease   ARGV[4] ttl ms   ARGV[5] owner
-- ARGV[6] wait ms (0 = try once)   ARGV[7] server process id   ARGV[8] liveness ms
-- Returns {status, fence, ms, now_ms}:
--   ACQUIRE.ACQUIRED  ms = the lock's TTL
--   ACQUIRE.BUSY      held by another, not queued; ms = holder's remaining TTL
--   ACQUIRE.QUEUED    ms = holder's remaining TTL (when to look again)
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local lease, ttl, owner = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local wait, proc, liveness = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local now_ms, now_us = clock()

local holder = redis.call('HGET', KEYS[1], 'lease')
if not holder then
  -- A free lock goes to the head of a live queue first: no barging past waiters.
  grant_next(now_ms, now_us)
  holder = redis.call('HGET', KEYS[1], 'lease')
  if not holder then
    return {ACQUIRE.ACQUIRED, grant(lease, owner, ttl, now_us), ttl, now_ms}
  end
end
if holder == lease then
  -- A retried call (reply lost) whose lease already holds the lock.
  return {ACQUIRE.ACQUIRED, tonumber(redis.call('HGET', KEYS[1], 'fence')), redis.call('PTTL', KEYS[1]), now_ms}
end
local pttl = redis.call('PTTL', KEYS[1])
if wait <= 0 then
  return {ACQUIRE.BUSY, 0, pttl, now_ms}
end

enqueue(Q, lease, now_ms, now_us, wait, proc, liveness, 1, ttl, owner)
-- The queue keys outlive their last waiter's deadline, then vanish by themselves.
local keep = wait + liveness
for i = 2, 4 do
  if redis.call('PTTL', KEYS[i]) < keep then
    redis.call('PEXPIRE', KEYS[i], keep)
  end
end
return {ACQUIRE.QUEUED, 0, pttl, now_ms}
