-- console_session_open.lua: a web console login (console/sessions.py) opens a session
-- of one API token, keeping at most `cap` sessions of that token: the oldest go.
-- KEYS[1] the token's index (zset: session -> created us: microseconds, so two logins
-- never tie and the oldest is plain), KEYS[2] the new session's record.
-- ARGV: record key prefix, the new session (the SHA-256 of its cookie, hex), the
-- token's digest (hex), tenant, role, idle ms, lifetime ms, cap.
-- Members that ended (idle expiry, logout) are pruned first; the cap bounds this work.
-- Returns {created ms, sessions dropped for the cap}.
--! include common.lua
local prefix, session = ARGV[1], ARGV[2]
local idle, life, cap = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local now, now_us = clock()
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if redis.call('EXISTS', prefix .. member) == 0 then
    redis.call('ZREM', KEYS[1], member)
  end
end
redis.call('HSET', KEYS[2], 'd', ARGV[3], 't', ARGV[4], 'r', ARGV[5], 'c', fmt(now), 'x', fmt(now + life),
           'a', fmt(now))
redis.call('PEXPIRE', KEYS[2], math.min(idle, life))
redis.call('ZADD', KEYS[1], fmt(now_us), session)
local dropped = 0
while redis.call('ZCARD', KEYS[1]) > cap do
  local oldest = redis.call('ZPOPMIN', KEYS[1])
  redis.call('DEL', prefix .. oldest[1])
  dropped = dropped + 1
end
redis.call('PEXPIRE', KEYS[1], life)  -- no member outlives the newest one's lifetime
return {now, dropped}
