-- lock_poll.lua: heartbeat of a server process that has callers waiting on the lock.
-- Marks the process alive (so its waiters are not skipped), hands a lock that
-- expired to the queue's head, and reports the holder so the process can resolve a
-- grant whose notification it missed and look again when the holder's TTL ends.
-- KEYS: see lock_common.lua
-- ARGV[3] server process id   ARGV[4] liveness ms   ARGV[5..] leases it has queued here
-- Returns {holder lease or '', fence, holder pttl ms, now_ms, dropped lease, ...}: the
-- given leases neither queued nor holding (passed over while the process was silent).
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
local now_ms, now_us = clock()
heartbeat(Q, ARGV[3], now_ms, tonumber(ARGV[4]))
if redis.call('EXISTS', KEYS[1]) == 0 then
  grant_next(now_ms, now_us)
end
local h = redis.call('HMGET', KEYS[1], 'lease', 'fence')
local reply = {h[1] or '', tonumber(h[2] or '0'), redis.call('PTTL', KEYS[1]), now_ms}
for i = 5, #ARGV do
  if ARGV[i] ~= h[1] and not redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    reply[#reply + 1] = ARGV[i]
  end
end
return reply
