-- lock_withdraw.lua: a waiter gives up (its wait timed out, or its caller went away).
-- A grant can race the give-up; the caller decides whether to keep it or pass it on.
-- KEYS: see lock_common.lua
-- ARGV[3] lease   ARGV[4] '1' = release a grant that arrived, '0' = keep it
-- Returns {WITHDRAW.LEFT_QUEUE}; {WITHDRAW.KEPT, fence, pttl, now_ms} had been granted
-- and keeps it; {WITHDRAW.PASSED_ON} had been granted and released it;
-- {WITHDRAW.NOT_WAITING} neither queued nor holding.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local lease = ARGV[3]
local now_ms, now_us = clock()
redis.call('HDEL', KEYS[3], lease)
if redis.call('ZREM', KEYS[2], lease) == 1 then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    grant_next(now_ms, now_us)
  end
  tidy(Q)
  return {WITHDRAW.LEFT_QUEUE}
end
if redis.call('HGET', KEYS[1], 'lease') ~= lease then
  return {WITHDRAW.NOT_WAITING}
end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[1])
  grant_next(now_ms, now_us)
  return {WITHDRAW.PASSED_ON}
end
return {WITHDRAW.KEPT, tonumber(redis.call('HGET', KEYS[1], 'fence')), redis.call('PTTL', KEYS[1]), now_ms}
