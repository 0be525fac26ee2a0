-- lock_acquire_many.lua: take several locks all or none, or wait for them without
-- holding or reserving any. The uncontended path is this one script, one round trip.
-- KEYS: five per lock, in the order of lock_common.lua (holder, queue, waiters, procs, fence)
-- ARGV[1] unused ('')   ARGV[2] fence retention ms   ARGV[3] lease   ARGV[4] ttl ms
-- ARGV[5] owner   ARGV[6] wait ms (0 = try once)   ARGV[7] server process id
-- ARGV[8] liveness ms   ARGV[9..] each lock's wake-up channel, in KEYS order
-- Returns {status, ms, now_ms, fence per lock...}:
--   ACQUIRE.ACQUIRED  ms = the TTL; one fence per lock
--   ACQUIRE.BUSY      not all free, not queued; ms = until the first holder's TTL ends (-1: none)
--   ACQUIRE.QUEUED    ms as for BUSY; queued in every lock's queue, as one waiter for all
-- The caller may take them when each is free and no live waiter is ahead of it in
-- that lock's queue (so callers for several locks are served in arrival order, one
-- Redis clock ordering every queue alike: the oldest is first in all of its queues,
-- and nobody waits holding a part, so no two of them can deadlock).
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local lease, ttl, owner = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local wait, proc, liveness = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local n = #KEYS / 5
local now_ms, now_us = clock()

-- The first live waiter queued ahead of the lease (of all, if it is not queued): id, n.
local function first_ahead(L)
  while true do
    local id = redis.call('ZRANGE', L.queue, 0, 0)[1]
    if not id or id == lease then
      return nil
    end
    local k = live(L, redis.call('HGET', L.waiters, id), now_ms)
    if k then
      return id, k
    end
    remove(L, id)
  end
end

local held_all, free_all, wake = true, true, -1
for i = 1, n do
  local L = lock_at((i - 1) * 5)
  local holder = redis.call('HGET', L.holder, 'lease')
  if not holder then
    local id, k = first_ahead(L)
    if id and k == 1 then
      -- A free lock with a single waiter first in line: serve it (as its own scripts would have).
      grant_next_of(L, ARGV[8 + i], now_ms, now_us)
      holder = redis.call('HGET', L.holder, 'lease')
    elseif id then
      free_all = false
    end
  end
  if holder ~= lease then
    held_all = false
  end
  if holder and holder ~= lease then
    free_all = false
    local pttl = redis.call('PTTL', L.holder)
    if wake < 0 or pttl < wake then
      wake = pttl
    end
  end
end

local fences = {}
if held_all then
  -- A retried call (reply lost) whose lease already holds them all.
  for i = 1, n do
    fences[i] = tonumber(redis.call('HGET', lock_at((i - 1) * 5).holder, 'fence'))
  end
  return {ACQUIRE.ACQUIRED, redis.call('PTTL', KEYS[1]), now_ms, unpack(fences)}
end
if free_all then
  for i = 1, n do
    local L = lock_at((i - 1) * 5)
    if redis.call('HGET', L.holder, 'lease') ~= lease then
      remove(L, lease)
      fences[i] = grant_of(L, lease, owner, ttl, now_us)
    else
      fences[i] = tonumber(redis.call('HGET', L.holder, 'fence'))
      redis.call('PEXPIRE', L.holder, ttl)
    end
  end
  return {ACQUIRE.ACQUIRED, ttl, now_ms, unpack(fences)}
end
if wait <= 0 then
  return {ACQUIRE.BUSY, wake, now_ms}
end
local keep = wait + liveness
for i = 1, n do
  local L = lock_at((i - 1) * 5)
  -- n > 1 marks a waiter for several locks: grant_next_of passes it over.
  enqueue(L, lease, now_ms, now_us, wait, proc, liveness, math.max(n, 2), ttl, owner)
  for _, key in ipairs({L.queue, L.waiters, L.procs}) do
    if redis.call('PTTL', key) < keep then
      redis.call('PEXPIRE', key, keep)
    end
  end
end
return {ACQUIRE.QUEUED, wake, now_ms}
