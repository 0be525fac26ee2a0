-- semaphore_set_limit.lua: SetLimit: store the semaphore's limit, kept for good, and
-- apply it at once. A higher limit admits the waiters that now fit, publishing their
-- grants as a release does; a lower one evicts no holder (grants wait until the held
-- permits fit under it) and fails a queued request for more permits than it when that
-- request reaches the head (grant_next).
-- KEYS: see semaphore_common.lua
-- ARGV[2] limit (1 or more)
-- Returns the limit stored before (0: none).
--! include common.lua
--! include waiting.lua
--! include semaphore_common.lua
local limit = tonumber(ARGV[2])
local now_ms = clock()
local previous = stored_limit()
local held = sweep(now_ms)
redis.call('HSET', KEYS[6], 'limit', limit, 'by', 'set')
redis.call('PERSIST', KEYS[6])
grant_next(now_ms, held)
return previous
