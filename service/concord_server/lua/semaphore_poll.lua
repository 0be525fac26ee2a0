-- semaphore_poll.lua: heartbeat of a server process with callers waiting here.
-- Marks the process alive, frees expired holders' permits and admits waiters, and
-- lists the holders so the process can resolve grants whose notification it missed.
-- KEYS: see semaphore_common.lua
-- ARGV[2] server process id   ARGV[3] liveness ms   ARGV[4..] permit ids it has queued here
-- Returns {ms until the first holder expires (-1: none), now_ms, n, n dropped ids, id1,
-- expires1, id2, ...}: dropped ids are the given ones neither queued nor holding
-- (passed over while the process was silent), then the holders, then the given ids a
-- lowered limit failed, each with expires -1 (as their lost notification would say).
--! include common.lua
--! include waiting.lua
--! include semaphore_common.lua
local now_ms = clock()
heartbeat(Q, ARGV[2], now_ms, tonumber(ARGV[3]))
grant_next(now_ms, sweep(now_ms))
local dropped, failed = {}, {}
for i = 4, #ARGV do
  if not redis.call('ZSCORE', KEYS[3], ARGV[i]) and not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    -- The FAILED record stays until the caller withdraws, so a lost reply loses nothing.
    if redis.call('HGET', KEYS[4], ARGV[i]) == FAILED then
      failed[#failed + 1] = ARGV[i]
    else
      dropped[#dropped + 1] = ARGV[i]
    end
  end
end
local reply = {next_expiry(KEYS[1], now_ms), now_ms, #dropped}
for _, id in ipairs(dropped) do
  reply[#reply + 1] = id
end
for _, v in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')) do
  reply[#reply + 1] = v
end
for _, id in ipairs(failed) do
  reply[#reply + 1] = id
  reply[#reply + 1] = FAILED
end
return reply
