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
each_first_live(Q, limit, now_ms, function(mode, owner, since_ms)  -- a read-write waiter's "permits" is its mode
  reply[#reply + 1] = mode
  reply[#reply + 1] = owner
  reply[#reply + 1] = since_ms
end)
return reply
