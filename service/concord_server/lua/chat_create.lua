-- chat_create.lua: a new chat with its members and a first message from the sender.
-- KEYS: see chat_common.lua
-- ARGV[4] sender   ARGV[5] first message body   ARGV[6..] members (the sender included)
-- Publishes the first message's id only: nobody listens to a chat before it exists
-- (members learn of it through their user channels, then read it).
-- Returns {CREATE.TAKEN} the chat exists, else {CREATE.CREATED, message id, sent ms}.
--! include status.lua
--! include common.lua
--! include chat_common.lua
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {CREATE.TAKEN}
end
for i = 6, #ARGV do
  redis.call('ZADD', KEYS[1], 0, ARGV[i])
end
redis.call('HSET', KEYS[3], 'seq', 0, 'bytes', 0)
local now_ms = clock()
return {CREATE.CREATED, append(ARGV[4], ARGV[5], now_ms, -1), now_ms}
