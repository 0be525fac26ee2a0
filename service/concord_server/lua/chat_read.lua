-- chat_read.lua: a member's view of a chat, and the messages after a position (read only).
-- KEYS: see chat_common.lua
-- ARGV[4] user   ARGV[5] read after this id, or after the member's seen id if that is later
-- ARGV[6] most messages
-- Returns {-1} no such chat, {0} not a member, else
-- {1, seen id, last id, first kept id, id 1, sender 1, body 1, sent ms 1, id 2, ...}.
--! include chat_common.lua
if redis.call('EXISTS', KEYS[3]) == 0 then
  return {-1}
end
local seen = redis.call('ZSCORE', KEYS[1], ARGV[4])
if not seen then
  return {0}
end
seen = tonumber(seen)
local seq = tonumber(redis.call('HGET', KEYS[3], 'seq'))
local reply = {1, seen, seq, first_id(seq)}
-- Never before the member's seen id: what it has seen (acked from another session,
-- or from before it left and rejoined) is not pending.
local after = math.max(tonumber(ARGV[5]), seen)
if tonumber(ARGV[6]) > 0 and after < seq then
  for _, e in ipairs(redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', '+', 'COUNT', ARGV[6])) do
    local f = {}
    for i = 1, #e[2], 2 do
      f[e[2][i]] = e[2][i + 1]
    end
    reply[#reply + 1] = message_id(e[1])
    reply[#reply + 1] = f.s
    reply[#reply + 1] = f.b
    reply[#reply + 1] = f.t
  end
end
return reply
