-- chat_index.lua: the set of chats a user belongs to (a user's own slot).
-- KEYS[1] the user's chats (set)
-- ARGV[1] the user's wake-up channel   ARGV[2] add | remove   ARGV[3] chat id
-- Publishes "<action> <chat id>" so the user's live subscriptions follow along.
-- Returns 1 if the set changed, else 0.
local changed
if ARGV[2] == 'add' then
  changed = redis.call('SADD', KEYS[1], ARGV[3])
else
  changed = redis.call('SREM', KEYS[1], ARGV[3])
end
if changed == 1 then
  redis.call('SPUBLISH', ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
end
return changed
