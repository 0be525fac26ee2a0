-- semaphore_withdraw.lua: a waiter gives up (timed out, or its caller went away).
-- A grant can race the give-up; the caller decides whether to keep it or pass it on.
-- KEYS: see semaphore_common.lua
-- ARGV[2] permit id   ARGV[3] '1' = release a grant that arrived, '0' = keep it
-- Returns {WITHDRAW.LEFT_QUEUE}; {WITHDRAW.KEPT, remaining ms, now_ms} had been granted
-- and keeps it; {WITHDRAW.PASSED_ON} had been granted and released it;
-- {WITHDRAW.NOT_WAITING} neither queued nor holding; {WITHDRAW.FAILED} a lowered
-- limit had failed it (its FAILED record is gone now).
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include semaphore_common.lua
local id = ARGV[2]
local now_ms = clock()
local held = sweep(now_ms)
local failed = redis.call('HGET', KEYS[4], id) == FAILED
redis.call('HDEL', KEYS[4], id)
if redis.call('ZREM', KEYS[3], id) == 1 then
  grant_next(now_ms, held)  -- it may have been the head holding others back
  tidy(Q)
  return {WITHDRAW.LEFT_QUEUE}
end
local expires = redis.call('ZSCORE', KEYS[1], id)
if not expires then
  return {failed and WITHDRAW.FAILED or WITHDRAW.NOT_WAITING}
end
if ARGV[3] == '1' then
  grant_next(now_ms, release(id, held))
  return {WITHDRAW.PASSED_ON}
end
return {WITHDRAW.KEPT, tonumber(expires) - now_ms, now_ms}
