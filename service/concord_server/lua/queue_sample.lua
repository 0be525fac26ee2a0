-- queue_sample.lua: one sample of a queue's counts for the console's history
-- (primitives/queue_history.py), read after the clock's changes as Stats reads them;
-- at most one per interval however many processes or retries ask.
-- KEYS: see queue_common.lua; KEYS[17] series (list, newest first:
--   "<interval start ms> <ready> <delayed> <leased> <dead> <enqueued>", enqueued being
--   the queue's task counter, seq)
-- ARGV[7] interval ms   ARGV[8] samples kept (the list's length)   ARGV[9] the list's TTL ms
-- Returns {1 sampled | 0 the newest entry already covers this interval, the interval's start ms}
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
announce(sweep(now_ms))
local step = tonumber(ARGV[7])
local at = now_ms - now_ms % step
local newest = redis.call('LINDEX', KEYS[17], 0)
if newest and tonumber(string.match(newest, '^%d+')) >= at then
  return {0, at}
end
local entry = table.concat({fmt(at), redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]), redis.call('ZCARD', KEYS[5]), redis.call('GET', KEYS[6]) or '0'}, ' ')
redis.call('LPUSH', KEYS[17], entry)
redis.call('LTRIM', KEYS[17], 0, tonumber(ARGV[8]) - 1)
redis.call('PEXPIRE', KEYS[17], ARGV[9])
return {1, at}
