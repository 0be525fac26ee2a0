-- ratelimit_release.lua: Release: give a concurrency permit's units back, and ring the
-- key's waiters (the head of a Wait queue may fit now).
-- KEYS: the eight of one check (ratelimit_common.lua), then Wait's queue (zset).
-- ARGV[1] the permit   ARGV[2] the key's channel   ARGV[3] the time in us ('' for the
--   Redis clock, as in ratelimit_check.lua)
-- Returns 1 if the permit was held (now released), 0 if not (released already, or
-- expired: its units came back by themselves).
--! include common.lua
--! include ratelimit_common.lua
local _, now_us = clock()
if ARGV[3] ~= '' then
  now_us = tonumber(ARGV[3])
end
local k = check_keys(1)
held_now(k, now_us / 1000)  -- a permit past its period is not held: its units came back
if not release_permit(k, ARGV[1]) then
  return 0
end
local waiting = redis.call('ZCARD', KEYS[9])
if waiting > 0 then
  redis.call('SPUBLISH', ARGV[2], waiting)  -- each server wakes up to that many of its own
end
return 1
