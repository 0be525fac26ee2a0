-- lock_waiters.lua: for the web console, each given lock's holder and its first live
-- waiters in FIFO order: what lock_describe.lua tells and the queue's head, for many
-- locks in one script (the locks view's whole page on one Redis; on a cluster, the
-- locks of one slot: Locks.views). Writes nothing. Bounded: looks at the first
-- ARGV[3] (at most 50) queue entries of each lock only (dead ones among them are
-- skipped, not replaced), and counts live waiters as lock_describe.lua does
-- (count_live: exact up to COUNT_EXACT). An election's first five keys are a lock's
-- (keys.ElectionKeys): its candidates are read with this script too.
-- KEYS: five per lock (lock_common.lua)
-- ARGV: the common two (unused), then how many queue entries to look at per lock
-- Returns {now_ms, then per lock {live waiters, held 0/1, owner, fence, pttl ms, then
--   owner, waited since (ms) per live waiter shown}}
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local now_ms = clock()
local limit = math.min(math.max(tonumber(ARGV[3]) or 0, 0), 50)
local reply = {now_ms}
for i = 1, #KEYS / 5 do
  local L = lock_at((i - 1) * 5)
  local h = redis.call('HMGET', L.holder, 'lease', 'owner', 'fence')
  local one = {count_live(L, now_ms), h[1] and 1 or 0, h[2] or '', tonumber(h[3] or '0'), redis.call('PTTL', L.holder)}
  each_first_live(L, limit, now_ms, function(_, owner, since_ms)
    one[#one + 1] = owner
    one[#one + 1] = since_ms
  end)
  reply[#reply + 1] = one
end
return reply
