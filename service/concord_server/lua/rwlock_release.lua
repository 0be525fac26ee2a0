-- rwlock_release.lua: give a hold back (read or write) and admit the waiters that now fit.
-- KEYS: see rwlock_common.lua
-- ARGV[3] lease
-- Returns HELD.HELD released; HELD.NOT_HELD the lease does not hold it (released, or expired).
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include rwlock_common.lua
local now_ms, now_us = clock()
sweep(now_ms)
local held = redis.call('ZSCORE', KEYS[1], ARGV[3])
if held then
  release(ARGV[3])
end
grant_next(now_ms, now_us)
return held and HELD.HELD or HELD.NOT_HELD
