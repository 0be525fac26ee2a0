-- chat_member.lua: a member's seen position moves, or membership changes.
-- KEYS: see chat_common.lua
-- ARGV[4] action: ack | join | leave   ARGV[5] user
-- ARGV[6] ack: seen up to this id; join: most members
--   ack    seen = max(seen, min(id, last id)); then messages all have seen are deleted
--   join   a new member starts at the last message (an existing one keeps its place)
--   leave  removes the member and publishes "leave <user>" on the chat's channel (so
--          servers stop handing that user's streams the messages they hear, before the
--          next message reaches them); the last one out deletes the chat, else messages
--          all remaining members have seen are deleted
-- Returns {CHAT.NO_SUCH_CHAT}, {CHAT.NOT_A_MEMBER} (ack, leave), {CHAT.FULL} (join), else
-- {CHAT.OK, the member's seen id (ack, join), or 1 if the chat was deleted else 0 (leave)}.
--! include status.lua
--! include chat_common.lua
if redis.call('EXISTS', KEYS[3]) == 0 then
  return {CHAT.NO_SUCH_CHAT}
end
local action, user = ARGV[4], ARGV[5]
local seen = redis.call('ZSCORE', KEYS[1], user)
local seq = tonumber(redis.call('HGET', KEYS[3], 'seq'))
if action == 'join' then
  if not seen then
    if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[6]) then
      return {CHAT.FULL}
    end
    redis.call('ZADD', KEYS[1], seq, user)
    seen = seq
  end
  return {CHAT.OK, tonumber(seen)}
end
if not seen then
  return {CHAT.NOT_A_MEMBER}
end
if action == 'ack' then
  local up_to = math.min(tonumber(ARGV[6]), seq)
  if up_to > tonumber(seen) then
    redis.call('ZADD', KEYS[1], up_to, user)
    seen = up_to
    drop_seen()
  end
  return {CHAT.OK, tonumber(seen)}
end
redis.call('ZREM', KEYS[1], user)
redis.call('SPUBLISH', ARGV[1], 'leave ' .. user)
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {CHAT.OK, 1}
end
drop_seen()
return {CHAT.OK, 0}
