-- semaphore_describe.lua: the limit in force, live holders and live waiters. Writes nothing.
-- KEYS: see semaphore_common.lua
-- ARGV: only the common one
-- Returns {limit, now_ms, live waiters, id1, owner1, permits1, remaining_ms1, ...}
--! include common.lua
--! include waiting.lua
local now_ms = clock()
local limit = tonumber(redis.call('HGET', KEYS[6], 'limit') or '0')
local waiting = count_live({queue = KEYS[3], waiters = KEYS[4], procs = KEYS[5]}, now_ms)
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
