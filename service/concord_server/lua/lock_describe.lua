-- lock_describe.lua: the lock's state, counting only live waiters. Writes nothing.
-- KEYS: see lock_common.lua
-- ARGV: only the common two
-- Returns {held 0/1, owner, fence, pttl ms, live waiters, now_ms}
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local now_ms = clock()
local h = redis.call('HMGET', KEYS[1], 'lease', 'owner', 'fence')
local waiting = count_live(Q, now_ms)
local held = h[1] and 1 or 0
return {held, h[2] or '', tonumber(h[3] or '0'), redis.call('PTTL', KEYS[1]), waiting, now_ms}
