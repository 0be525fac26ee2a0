-- lock_activity_read.lua: a key space's lock activity (primitives/lock_activity.py)
-- with the Redis clock, so the reader can tell which interval is the current one.
-- KEYS[1] the list (see lock_activity_add.lua)   ARGV[1] most entries returned (newest first)
-- Returns {now_ms, entry, ...}, entries newest first.
--! include common.lua
local reply = {(clock())}
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  reply[#reply + 1] = entry
end
return reply
