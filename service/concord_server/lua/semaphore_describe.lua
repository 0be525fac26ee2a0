-- semaphore_describe.lua: the limit in force, live holders and live waiters. Writes nothing.
-- KEYS: see semaphore_common.lua
-- Returns {limit, now_ms, live waiters, id1, owner1, permits1, remaining_ms1, ...}
--! include common.lua
local now_ms = clock()
local limit = tonumber(redis.call('HGET', KEYS[6], 'limit') or '0')
local waiting = 0
local entries = redis.call('HGETALL', KEYS[4])
for i = 2, #entries, 2 do
  local deadline, proc = string.match(entries[i], '^%d+ %d+ (%d+) (%S+)')
  if tonumber(deadline) > now_ms and tonumber(redis.call('HGET', KEYS[5], proc) or '0') > now_ms then
    waiting = waiting + 1
  end
end
local reply = {limit, now_ms, waiting}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_ms, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local info = redis.call('HGET', KEYS[2], live[i]) or '0 '
  local permits, owner = string.match(info, '^(%d+) (.*)$')
  reply[#reply + 1] = live[i]
  reply[#reply + 1] = owner
  reply[#reply + 1] = tonumber(permits)
  reply[#reply + 1] = tonumber(live[i + 1]) - now_ms
end
return reply
