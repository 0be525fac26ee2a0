-- queue_pause.lua: pause or resume leasing, of the whole queue or of one group. Paused,
-- Dequeue and Consume lease nothing of it (blocked ones keep waiting) while tasks keep
-- arriving; resuming rings as many waiters as there are ready tasks it frees, at once.
-- KEYS: see queue_common.lua
-- ARGV[7] '1' pause, '0' resume   ARGV[8] group ('' the whole queue)
-- Returns 1 if it was paused before, else 0.
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
local g = ARGV[8]
if g ~= '' then
  local was = rules(g).paused and 1 or 0
  if ARGV[7] == '1' then
    redis.call('HSET', GROUP .. g, 'p', '1')
    redis.call('ZADD', KEYS[15], 0, g)
  else
    redis.call('HDEL', GROUP .. g, 'p')
  end
  rules_cache[g] = nil
  announce(sweep(now_ms))
  if review_lane(g, now_ms) == 1 then
    announce(redis.call('ZCARD', lane_key(g)))
  end
  if ARGV[7] == '0' then
    prune_group(g, now_ms)
  end
  return was
end
local was = paused() and 1 or 0
if ARGV[7] == '1' then
  redis.call('SET', KEYS[7], '1')
else
  redis.call('DEL', KEYS[7])
  sweep(now_ms)
  announce(redis.call('ZCARD', KEYS[2]))
end
return was
