-- queue_dequeue.lua: lease up to N ready tasks, highest order first.
-- KEYS: see queue_common.lua
-- ARGV[5] most tasks   ARGV[6] lease ms   ARGV[7] lease token prefix (random, per call)
-- ARGV[8] reply bytes: leases no more tasks than fit (task_bytes each; a reply that could
--         not be sent would strand them leased to nobody)   ARGV[9] 1: take the first
--         task even if it alone is over (nothing else is leased for this reply yet)
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
local budget, taken = tonumber(ARGV[8]), 0
for i, id in ipairs(ids) do
  taken = taken + task_bytes(id)
  if taken > budget and not (i == 1 and ARGV[9] == '1') then
    ids = {unpack(ids, 1, i - 1)}
    break
  end
end
local tasks = {}
if #ids > 0 then
  -- What every task shares is one call for the whole batch.
  for _, key in ipairs({KEYS[1], KEYS[2]}) do
    for_chunks(ids, function(chunk) redis.call('ZREM', key, unpack(chunk)) end)
  end
  local expires = fmt(now_ms + lease_ms)
  for_chunks(ids, function(chunk)
    local args = {}
    for _, id in ipairs(chunk) do
      args[#args + 1] = expires
      args[#args + 1] = id
    end
    redis.call('ZADD', KEYS[4], unpack(args))
  end)
  for i, id in ipairs(ids) do
    local f = redis.call('HMGET', task_key(id), unpack(REPLY_FIELDS))
    local att = tonumber(f[5]) + 1
    local lease = ARGV[7] .. '.' .. i
    redis.call('HSET', task_key(id), 'state', 'leased', 'lease', lease, 'lat', fmt(now_ms), 'att', att)
    event(now_ms, 'leased', id, 'a', att)
    f[4], f[5], f[7] = 'leased', tostring(att), lease
    tasks[#tasks + 1] = reply_of(id, f, expires)
  end
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
