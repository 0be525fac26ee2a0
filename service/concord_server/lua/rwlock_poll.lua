-- rwlock_poll.lua: heartbeat of a server process that has callers waiting on the lock.
-- Marks the process alive (so its waiters are not skipped), sweeps holders whose TTL
-- ran out and admits the waiters that now fit, and reports the state of the leases it
-- has queued, so it can resolve grants whose notification it missed.
-- KEYS: see rwlock_common.lua
-- ARGV[3] server process id   ARGV[4] liveness ms   ARGV[5..] leases it has queued here
-- Returns {ms until the first holder expires (-1: none), now_ms, lease1, state1, fence1,
-- expires_ms1, ...} for each given lease that is not queued: state 1 = holds it (with
-- its fence and expiry), 0 = dropped (neither queued nor holding: passed over while its
-- process was silent; fence and expiry 0).
--! include common.lua
--! include waiting.lua
--! include rwlock_common.lua
local now_ms, now_us = clock()
heartbeat(Q, ARGV[3], now_ms, tonumber(ARGV[4]))
sweep(now_ms)
grant_next(now_ms, now_us)
local reply = {next_expiry(KEYS[1], now_ms), now_ms}
for i = 5, #ARGV do
  local lease = ARGV[i]
  if not redis.call('ZSCORE', KEYS[3], lease) then
    local expires = redis.call('ZSCORE', KEYS[1], lease)
    reply[#reply + 1] = lease
    if expires then
      local _, fence = holder_info(lease)
      reply[#reply + 1] = 1
      reply[#reply + 1] = fence
      reply[#reply + 1] = tonumber(expires)
    else
      reply[#reply + 1] = 0
      reply[#reply + 1] = 0
      reply[#reply + 1] = 0
    end
  end
end
return reply
