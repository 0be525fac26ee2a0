-- rwlock_waiters.lua: the first live waiters of a read-write lock, in FIFO order, for
-- the web console. Writes nothing. Bounded: looks at the first ARGV[3] queue entries
-- only (at most 50; dead ones among them are skipped, not replaced), unlike
-- rwlock_describe.lua, which walks the whole queue.
-- KEYS: see rwlock_common.lua
-- ARGV: the common two, then how many queue entries to look at (at most 50)
-- Returns {now_ms, then mode, owner, waited since (ms) per live waiter shown}
--! include common.lua
--! include waiting.lua
--! include rwlock_common.lua
local now_ms = clock()
local limit = math.min(math.max(tonumber(ARGV[3]) or 0, 0), 50)
local reply = {now_ms}
if limit > 0 then
  local first = redis.call('ZRANGE', Q.queue, 0, limit - 1, 'WITHSCORES')
  for i = 1, #first, 2 do
    local mode, _, owner = live(Q, redis.call('HGET', Q.waiters, first[i]), now_ms)
    if mode then
      reply[#reply + 1] = mode
      reply[#reply + 1] = owner
      reply[#reply + 1] = math.floor(tonumber(first[i + 1]) / 1000)
    end
  end
end
return reply
