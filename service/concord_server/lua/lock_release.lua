-- lock_release.lua: free the lock if the lease holds it and hand it to the next waiter.
-- KEYS: see lock_common.lua
-- ARGV[3] lease
-- ARGV[4] this server process's id: it wakes a waiter of its own with the reply
--         (so that grant is not published; grant_next_of)
-- Returns {HELD.HELD, grant message or ''} released (the message as published to the
-- waiter granted next); {HELD.NOT_HELD} the lease does not hold the lock.
--! include status.lua
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[3] then
  return {HELD.NOT_HELD}
end
redis.call('DEL', KEYS[1])
local now_ms, now_us = clock()
return {HELD.HELD, grant_next(now_ms, now_us, ARGV[4]) or ''}
