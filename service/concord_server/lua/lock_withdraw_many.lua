-- lock_withdraw_many.lua: a waiter for several locks gives up (its wait timed out,
-- or its caller went away). A grant can race the give-up; the caller decides whether
-- to keep it or pass it on.
-- KEYS: five per lock (lock_acquire_many.lua)
-- ARGV[1] unused   ARGV[2] fence retention ms   ARGV[3] lease
-- ARGV[4] '1' = release what arrived, '0' = keep it   ARGV[5..] each lock's channel
-- Returns {WITHDRAW.LEFT_QUEUE}; {WITHDRAW.KEPT, pttl, now_ms, fence per lock...} had
-- been granted all and keeps them; {WITHDRAW.PASSED_ON} had been granted and released.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local lease, n = ARGV[3], #KEYS / 5
local now_ms, now_us = clock()
local held = 0
for i = 1, n do
  local L = lock_at((i - 1) * 5)
  if redis.call('ZREM', L.queue, lease) == 1 then
    redis.call('HDEL', L.waiters, lease)
    tidy(L)
    -- Younger waiters for several locks behind it may be first in line now.
    if redis.call('EXISTS', L.holder) == 0 then
      grant_next_of(L, ARGV[4 + i], now_ms, now_us)
    end
  end
  if redis.call('HGET', L.holder, 'lease') == lease then
    held = held + 1
  end
end
if held == 0 then
  return {WITHDRAW.LEFT_QUEUE}
end
if ARGV[4] == '1' or held < n then
  for i = 1, n do
    local L = lock_at((i - 1) * 5)
    if redis.call('HGET', L.holder, 'lease') == lease then
      redis.call('DEL', L.holder)
      grant_next_of(L, ARGV[4 + i], now_ms, now_us)
    end
  end
  return {WITHDRAW.PASSED_ON}
end
local reply = {WITHDRAW.KEPT, redis.call('PTTL', KEYS[1]), now_ms}
for i = 1, n do
  reply[#reply + 1] = tonumber(redis.call('HGET', lock_at((i - 1) * 5).holder, 'fence'))
end
return reply
