-- lock_waiters.lua: the lock's holder and its first live waiters, in FIFO order, for
-- the web console (one script a lock: what lock_describe.lua tells, and the queue's
-- head). Writes nothing. Bounded: looks at the first ARGV[3] queue entries only (dead
-- ones among them are skipped, not replaced), and counts live waiters as
-- lock_describe.lua does (count_live: exact up to COUNT_EXACT). An election's keys
-- are a lock's (keys.ElectionKeys): its candidates are read with this script too.
-- KEYS: see lock_common.lua
-- ARGV: the common two, then how many queue entries to look at (at most 50)
-- Returns {now_ms, live waiters, held 0/1, owner, fence, pttl ms, then owner, waited
--   since (ms) per live waiter shown}
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local now_ms = clock()
local limit = math.min(math.max(tonumber(ARGV[3]) or 0, 0), 50)
local h = redis.call('HMGET', KEYS[1], 'lease', 'owner', 'fence')
local reply = {now_ms, count_live(Q, now_ms), h[1] and 1 or 0, h[2] or '', tonumber(h[3] or '0'),
               redis.call('PTTL', KEYS[1])}
if limit > 0 then
  local first = redis.call('ZRANGE', Q.queue, 0, limit - 1, 'WITHSCORES')
  for i = 1, #first, 2 do
    local _, _, owner = live(Q, redis.call('HGET', Q.waiters, first[i]), now_ms)
    if owner then
      reply[#reply + 1] = owner
      reply[#reply + 1] = math.floor(tonumber(first[i + 1]) / 1000)
    end
  end
end
return reply
