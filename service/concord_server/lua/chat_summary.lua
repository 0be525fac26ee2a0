-- chat_summary.lua: one chat as the web console shows it. Writes nothing. Bounded:
-- a few O(1) / O(log N) reads and the first ARGV[4] (<= 50) members, those furthest
-- behind first (the members zset is scored by seen id).
-- KEYS: see chat_common.lua
-- ARGV: the common three (channel, most messages kept, most body bytes kept), then
--   how many members to return (at most 50)
-- Returns {} when the chat is gone, else {last id, first kept id (last + 1: none kept),
--   messages kept, body bytes kept, members, then user, seen id per member shown}
--! include chat_common.lua
if redis.call('EXISTS', KEYS[3]) == 0 then
  return {}
end
local meta = redis.call('HMGET', KEYS[3], 'seq', 'bytes')
local seq = tonumber(meta[1] or '0')
local limit = math.min(math.max(tonumber(ARGV[4]) or 0, 0), 50)
local reply = {seq, first_id(seq), redis.call('XLEN', KEYS[2]), tonumber(meta[2] or '0'),
               redis.call('ZCARD', KEYS[1])}
if limit > 0 then
  local members = redis.call('ZRANGE', KEYS[1], 0, limit - 1, 'WITHSCORES')
  for i = 1, #members, 2 do
    reply[#reply + 1] = members[i]
    reply[#reply + 1] = tonumber(members[i + 1])
  end
end
return reply
