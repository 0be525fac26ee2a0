-- rwlock_withdraw.lua: a waiter gives up (its wait timed out, or its caller went away).
-- A grant can race the give-up; the caller decides whether to keep it or pass it on.
-- KEYS: see rwlock_common.lua
-- ARGV[3] lease   ARGV[4] '1' = release a grant that arrived, '0' = keep it
-- Returns {WITHDRAW.LEFT_QUEUE}; {WITHDRAW.KEPT, fence, remaining ms, now_ms} had been
-- granted and keeps it; {WITHDRAW.PASSED_ON} had been granted and released it;
-- {WITHDRAW.NOT_WAITING} neither queued nor holding.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include rwlock_common.lua
local lease = ARGV[3]
local now_ms, now_us = clock()
sweep(now_ms)
redis.call('HDEL', KEYS[4], lease)
if redis.call('ZREM', KEYS[3], lease) == 1 then
  grant_next(now_ms, now_us)  -- it may have been the head holding others back
  tidy(Q)
  return {WITHDRAW.LEFT_QUEUE}
end
local expires = redis.call('ZSCORE', KEYS[1], lease)
if not expires then
  grant_next(now_ms, now_us)
  return {WITHDRAW.NOT_WAITING}
end
if ARGV[4] == '1' then
  release(lease)
  grant_next(now_ms, now_us)
  return {WITHDRAW.PASSED_ON}
end
grant_next(now_ms, now_us)
local _, fence = holder_info(lease)
return {WITHDRAW.KEPT, fence, tonumber(expires) - now_ms, now_ms}
