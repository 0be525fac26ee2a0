-- lock_describe.lua: the lock's state, counting only live waiters. Writes nothing.
-- KEYS: see lock_common.lua
-- Returns {held 0/1, owner, fence, pttl ms, live waiters, now_ms}
--! include common.lua
--! include lock_common.lua
local now_ms = clock()
local h = redis.call('HMGET', KEYS[1], 'lease', 'owner', 'fence')
local live = 0
local entries = redis.call('HGETALL', KEYS[3])
for i = 2, #entries, 2 do
  local deadline, proc = string.match(entries[i], '^%d+ (%d+) (%S+)')
  if tonumber(deadline) > now_ms and tonumber(redis.call('HGET', KEYS[4], proc) or '0') > now_ms then
    live = live + 1
  end
end
local held = h[1] and 1 or 0
return {held, h[2] or '', tonumber(h[3] or '0'), redis.call('PTTL', KEYS[1]), live, now_ms}
