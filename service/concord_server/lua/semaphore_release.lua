-- semaphore_release.lua: return a holder's permits and admit the waiters that now fit.
-- KEYS: see semaphore_common.lua
-- ARGV[2] permit id
-- Returns {HELD.HELD, grant message...} released (the messages as published to the
-- waiters it admitted); {HELD.NOT_HELD} the permit is not held (released, or expired).
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include semaphore_common.lua
local now_ms = clock()
local held = sweep(now_ms)
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return {HELD.NOT_HELD}
end
grant_next(now_ms, release(ARGV[2], held))
return {HELD.HELD, unpack(GRANTED)}
