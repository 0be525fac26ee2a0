-- chat_read.lua: where some users stand in a chat, and the messages after a position
-- (read only). One user: a member's own read. Several: the one read a server process
-- makes for all of its local subscribers of a chat when the chat rings.
-- KEYS: see chat_common.lua
-- ARGV[4] read after this id   ARGV[5] most messages   ARGV[6] most body bytes (the message
-- that reaches it is the last one read)   ARGV[7..] users
-- Reads start after ARGV[4] or after the lowest seen id of the users who are members,
-- whichever is later: what they have all seen is not pending for any of them.
-- Returns {CHAT.NO_SUCH_CHAT}, else {CHAT.OK, last id, first kept id, k, seen id of user 1
-- (-1: not a member), ..., seen id of user k, then id, sender, body, sent ms per message}.
--! include status.lua
--! include chat_common.lua
if redis.call('EXISTS', KEYS[3]) == 0 then
  return {CHAT.NO_SUCH_CHAT}
end
local seq = tonumber(redis.call('HGET', KEYS[3], 'seq'))
local k = #ARGV - 6
local reply = {CHAT.OK, seq, first_id(seq), k}
local lowest = nil
for i = 7, #ARGV do
  local seen = redis.call('ZSCORE', KEYS[1], ARGV[i])
  seen = seen and tonumber(seen) or -1
  if seen >= 0 and (not lowest or seen < lowest) then
    lowest = seen
  end
  reply[#reply + 1] = seen
end
if not lowest then
  return reply  -- none of them is a member
end
local after = math.max(tonumber(ARGV[4]), lowest)
if tonumber(ARGV[5]) > 0 and after < seq then
  local bytes, most_bytes = 0, tonumber(ARGV[6])
  for _, e in ipairs(redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', '+', 'COUNT', ARGV[5])) do
    local f = {}
    for i = 1, #e[2], 2 do
      f[e[2][i]] = e[2][i + 1]
    end
    reply[#reply + 1] = message_id(e[1])
    reply[#reply + 1] = f.s
    reply[#reply + 1] = f.b
    reply[#reply + 1] = f.t
    bytes = bytes + #f.b
    if bytes >= most_bytes then
      break  -- a reader catching up on big messages takes them a slice at a time
    end
  end
end
return reply
