-- chat_send.lua: append a message from a member, and publish it on the chat's channel:
-- the whole message (subscribers' servers deliver it without reading it back) when
-- the body has at most ARGV[6] bytes, else only its id (they read it).
-- KEYS: see chat_common.lua
-- ARGV[4] sender   ARGV[5] body   ARGV[6] most body bytes carried in the publish
-- Returns {CHAT.NO_SUCH_CHAT}, {CHAT.NOT_A_MEMBER} (the sender), else
-- {CHAT.OK, message id, sent ms}.
--! include status.lua
--! include common.lua
--! include chat_common.lua
if redis.call('EXISTS', KEYS[3]) == 0 then
  return {CHAT.NO_SUCH_CHAT}
end
if not redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  return {CHAT.NOT_A_MEMBER}
end
local now_ms = clock()
return {CHAT.OK, append(ARGV[4], ARGV[5], now_ms, tonumber(ARGV[6])), now_ms}
