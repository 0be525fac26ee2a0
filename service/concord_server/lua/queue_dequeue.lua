-- queue_dequeue.lua: lease up to N ready tasks, highest order first.
-- KEYS: see queue_common.lua
-- ARGV[5] most tasks   ARGV[6] lease ms   ARGV[7] lease token prefix (random, per call)
-- Returns {now_ms, ms until the clock changes the queue (-1: never), ready tasks left,
--          task 1 (see task_reply), task 2, ...}; while paused, no task and 0 left.
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
local became_ready = sweep(now_ms)
if paused() then
  return {now_ms, next_change(now_ms), 0}
end
local lease_ms = tonumber(ARGV[6])
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[5]) - 1)
local tasks = {}
for i, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  local att = redis.call('HINCRBY', task_key(id), 'att', 1)
  event(now_ms, 'leased', id, 'a', att)
  redis.call('HSET', task_key(id), 'state', 'leased', 'lease', ARGV[7] .. '.' .. i, 'lat', fmt(now_ms))
  redis.call('ZADD', KEYS[4], now_ms + lease_ms, id)
  tasks[#tasks + 1] = task_reply(id)
end
local left = redis.call('ZCARD', KEYS[1])
-- Tasks the clock made ready here may have other waiters; so may ones we left.
if became_ready > 0 then
  announce(left)
end
local reply = {now_ms, next_change(now_ms), left}
for _, t in ipairs(tasks) do
  reply[#reply + 1] = t
end
return reply
