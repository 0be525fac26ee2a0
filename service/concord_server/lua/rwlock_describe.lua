-- rwlock_describe.lua: the live holders and the live waiters in queue order. Writes nothing.
-- KEYS: see rwlock_common.lua
-- ARGV: only the common two
-- Returns {now_ms, n holders, mode1, owner1, fence1, remaining_ms1, ..., then for each
-- live waiter, first in line first: mode, owner, 0, ms left of its wait}. The holders
-- are one writer (mode 2) or readers (mode 1), in the order their TTLs end.
--! include common.lua
--! include waiting.lua
--! include rwlock_common.lua
local now_ms = clock()
local holders = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_ms, '+inf', 'WITHSCORES')
local reply = {now_ms, #holders / 2}
for i = 1, #holders, 2 do
  local mode, fence, owner = holder_info(holders[i])
  reply[#reply + 1] = mode or 0
  reply[#reply + 1] = owner or ''
  reply[#reply + 1] = fence or 0
  reply[#reply + 1] = tonumber(holders[i + 1]) - now_ms
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  local entry = redis.call('HGET', KEYS[4], id)
  local mode, _, owner = live(Q, entry, now_ms)
  if mode then
    reply[#reply + 1] = mode
    reply[#reply + 1] = owner
    reply[#reply + 1] = 0
    reply[#reply + 1] = tonumber(string.match(entry, '^(%d+)')) - now_ms
  end
end
return reply
