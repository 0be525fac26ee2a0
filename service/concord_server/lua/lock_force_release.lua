-- lock_force_release.lua: an operator takes the lock from whoever holds it (the
-- holder is not told) and hands it to the next live waiter, as a release does; the
-- next grant's fencing token is higher, as always.
-- KEYS: see lock_common.lua
-- ARGV: only the common two
-- Returns {HELD.HELD, fence, owner} of the holder removed; {HELD.NOT_HELD} nobody held it.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local fence = redis.call('HGET', KEYS[1], 'fence')
if not fence then
  return {HELD.NOT_HELD}
end
local owner = redis.call('HGET', KEYS[1], 'owner') or ''
redis.call('DEL', KEYS[1])
local now_ms, now_us = clock()
grant_next(now_ms, now_us)
return {HELD.HELD, tonumber(fence), owner}
