-- election_history.lua: the leader now and the changes of leadership after a
-- position, for Leader and Observe. First hands an expired leadership on (settle),
-- so what it reports is never a leader whose TTL has run out.
-- KEYS: see election_common.lua
-- ARGV[3] the changes after this n   ARGV[4] at most this many (0: none)
-- Returns {n of the last change (0: none kept or ever), n of the oldest kept change,
--   leader's candidate, value, term (0: nobody leads), pttl ms, live candidates
--   waiting, now_ms, then per change {n, term, candidate, value}}
--! include common.lua
--! include waiting.lua
--! include lock_common.lua
--! include election_common.lua
local now_ms, now_us = clock()
settle(now_ms, now_us)
local last = tonumber(redis.call('HGET', KEYS[8], 'n') or '0')
local oldest = redis.call('XRANGE', KEYS[7], '-', '+', 'COUNT', 1)
local first = 0
if oldest[1] then
  first = tonumber(string.match(oldest[1][1], '^(%d+)'))
end
local h = redis.call('HMGET', KEYS[1], 'owner', 'value', 'fence')
local reply = {last, first, h[1] or '', h[2] or '', tonumber(h[3] or '0'), redis.call('PTTL', KEYS[1]),
               count_live(Q, now_ms), now_ms}
if tonumber(ARGV[4]) > 0 then
  for _, e in ipairs(redis.call('XRANGE', KEYS[7], '(' .. ARGV[3] .. '-0', '+', 'COUNT', ARGV[4])) do
    local f = e[2]  -- t term c candidate v value ms ms
    reply[#reply + 1] = {tonumber(string.match(e[1], '^(%d+)')), tonumber(f[2]), f[4], f[6]}
  end
end
return reply
