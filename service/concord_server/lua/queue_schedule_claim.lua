-- queue_schedule_claim.lua: enqueue the due ticks of one schedule, exactly once.
-- Every server's ticker may plan the same tick (primitives/schedule_ticker.py); the
-- first claim moves the schedule's next tick on, so the others find it STALE. No
-- tick is enqueued before its time on Redis's clock.
-- KEYS: see queue_common.lua
-- ARGV[7] the schedule's hash key, ARGV[8] its name
-- ARGV[9] the version and ARGV[10] the next tick the caller planned from (as read)
-- ARGV[11] the next tick after this claim (after Redis's now when read)
-- ARGV[12] the latest tick dropped as missed ('' if none)
-- ARGV[13..] the ticks to enqueue (ms, oldest first): one task each, fields sch sat
-- Returns {status, ms until the queue's next tick (-1: none)}: SCHEDULE.OK (enqueued),
--   STALE (nothing done: changed, paused, claimed, or a tick not due), NO_SUCH_SCHEDULE.
--! include common.lua
--! include status.lua
--! include queue_common.lua
local key, name = ARGV[7], ARGV[8]
local now_ms = clock()
local ready = sweep(now_ms)

local function until_next()
  local head = redis.call('ZRANGE', KEYS[10], 0, 0, 'WITHSCORES')
  if head[2] == nil or head[2] == 'inf' then
    return -1
  end
  return math.max(0, tonumber(head[2]) - now_ms)
end

local s = redis.call('HMGET', key, 'ver', 'paused', 'next', 'type', 'payload', 'prio', 'max')
local status = SCHEDULE.OK
if s[1] == false then
  status = SCHEDULE.NO_SUCH_SCHEDULE
elseif s[1] ~= ARGV[9] or s[2] == '1' or s[3] ~= ARGV[10] then
  status = SCHEDULE.STALE
end
for i = 13, #ARGV do
  if tonumber(ARGV[i]) > now_ms then
    status = SCHEDULE.STALE
  end
end
if status ~= SCHEDULE.OK then
  announce(ready)
  return {status, until_next()}
end
local max = tonumber(s[7])
if max == 0 then
  max = tonumber(redis.call('HGET', KEYS[9], 'ma') or DEFAULT_MAX_ATTEMPTS)
end
local id = nil
for i = 13, #ARGV do
  id = add_task(s[4], s[5], tonumber(s[6]), max, now_ms, now_ms, name, '', {'sat', ARGV[i]})
  ready = ready + 1
end
redis.call('HSET', key, 'next', ARGV[11])
redis.call('ZADD', KEYS[10], ARGV[11], name)
if id then
  redis.call('HSET', key, 'last', ARGV[#ARGV], 'lastid', id)
  redis.call('HINCRBY', key, 'runs', #ARGV - 12)
end
if ARGV[12] ~= '' then
  redis.call('HSET', key, 'lastmiss', ARGV[12])
end
announce(ready)
return {status, until_next()}
