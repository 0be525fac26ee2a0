-- console_session_close.lua: a web console session ends (logout, or its token was
-- revoked), on every replica at once (console/sessions.py). With no session named,
-- every session of the token ends (its token left the token file).
-- KEYS[1] the token's index.
-- ARGV: record key prefix, the session (its member in the index) or '' for all of them.
-- Returns the number of sessions ended.
local prefix, session = ARGV[1], ARGV[2]
if session ~= '' then
  redis.call('ZREM', KEYS[1], session)
  return redis.call('DEL', prefix .. session)
end
local ended = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  ended = ended + redis.call('DEL', prefix .. member)
end
redis.call('DEL', KEYS[1])
return ended
