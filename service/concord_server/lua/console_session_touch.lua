-- console_session_touch.lua: a web console request finds its session (console/sessions.py).
-- An idle session's TTL slides, written at most once per `refresh` ms (the record's
-- `a`); a session past its lifetime is deleted.
-- KEYS[1] the token's index, KEYS[2] the session's record.
-- ARGV: the session (its member in the index), idle ms, refresh ms.
-- Returns {1, digest hex, tenant, role, created ms, ends ms}; {0}: no such session.
--! include common.lua
local got = redis.call('HMGET', KEYS[2], 'd', 't', 'r', 'c', 'x', 'a')
if not got[1] then
  return {0}
end
local now = clock()
local ends, touched = tonumber(got[5]), tonumber(got[6])
if now >= ends then
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[1], ARGV[1])
  return {0}
end
if now - touched >= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[2], 'a', fmt(now))
  redis.call('PEXPIRE', KEYS[2], math.min(tonumber(ARGV[2]), ends - now))
end
return {1, got[1], got[2], got[3], tonumber(got[4]), ends}
