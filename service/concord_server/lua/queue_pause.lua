-- queue_pause.lua: pause or resume leasing. Paused, Dequeue and Consume lease
-- nothing (blocked ones keep waiting) while tasks keep arriving; resuming rings as
-- many waiters as there are ready tasks, at once.
-- KEYS: see queue_common.lua
-- ARGV[5] '1' pause, '0' resume
-- Returns 1 if the queue was paused before, else 0.
--! include common.lua
--! include queue_common.lua
local was = paused() and 1 or 0
if ARGV[5] == '1' then
  redis.call('SET', KEYS[7], '1')
else
  redis.call('DEL', KEYS[7])
  sweep(clock())
  announce(redis.call('ZCARD', KEYS[1]))
end
return was
