-- election_withdraw.lua: a candidate gives up (its wait timed out, or its caller
-- went away, or its Lead stream ended). A grant can race the give-up; the caller
-- decides whether to keep it or pass it on.
-- KEYS: see election_common.lua
-- ARGV[3] lease   ARGV[4] '1' = resign a leadership that arrived, '0' = keep it
-- Returns {WITHDRAW.LEFT_QUEUE}; {WITHDRAW.KEPT, term, pttl, now_ms} had been elected
-- and keeps it; {WITHDRAW.PASSED_ON} had been elected and resigned;
-- {WITHDRAW.NOT_WAITING} neither queued nor leading.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
--! include election_common.lua
local lease = ARGV[3]
local now_ms, now_us = clock()
redis.call('HDEL', KEYS[3], lease)
redis.call('HDEL', KEYS[6], lease)
if redis.call('ZREM', KEYS[2], lease) == 1 then
  tidy(Q)
  settle(now_ms, now_us)
  return {WITHDRAW.LEFT_QUEUE}
end
if redis.call('HGET', KEYS[1], 'lease') ~= lease then
  settle(now_ms, now_us)
  return {WITHDRAW.NOT_WAITING}
end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[1])
  settle(now_ms, now_us)
  return {WITHDRAW.PASSED_ON}
end
announce(now_ms)
return {WITHDRAW.KEPT, tonumber(redis.call('HGET', KEYS[1], 'fence')), redis.call('PTTL', KEYS[1]), now_ms}
