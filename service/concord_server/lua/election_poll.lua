-- election_poll.lua: heartbeat of a server process with candidates waiting here.
-- Marks the process alive, hands an expired leadership to the queue's head, and
-- reports the leader so the process can resolve an election whose notification it
-- missed and look again when the leader's TTL ends.
-- KEYS: see election_common.lua
-- ARGV[3] server process id   ARGV[4] liveness ms   ARGV[5..] leases it has queued here
-- Returns {leader lease or '', term, leader pttl ms, now_ms, dropped lease, ...}: the
-- given leases neither queued nor leading (passed over while the process was silent).
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
--! include election_common.lua
local now_ms, now_us = clock()
heartbeat(Q, ARGV[3], now_ms, tonumber(ARGV[4]))
settle(now_ms, now_us)
local h = redis.call('HMGET', KEYS[1], 'lease', 'fence')
local reply = {h[1] or '', tonumber(h[2] or '0'), redis.call('PTTL', KEYS[1]), now_ms}
for i = 5, #ARGV do
  if ARGV[i] ~= h[1] and not redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    reply[#reply + 1] = ARGV[i]
  end
end
return reply
