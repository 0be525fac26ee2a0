-- queue_schedule.lua: create, update, pause, resume or delete one schedule.
-- KEYS: see queue_common.lua
-- ARGV[7] action: create | update | pause | resume | delete
-- ARGV[8] the schedule's hash key, ARGV[9] its name
-- ARGV[10] (create, update, resume) its next tick, ms: the caller computed it from the
--         spec and Redis's now; unused while the schedule stays paused
-- ARGV[11] (create, update) '1' paused, '0' active, '' (update) as it was
-- ARGV[12..] (create, update) the spec as field, value pairs: type payload prio max
--         missed grace, and cron tz or every anchor; update replaces the whole spec
-- A schedule's hash also holds ver (bumped by every change, so a tick planned from
-- an older spec is refused), paused, next, created, updated, and what its ticks did:
-- last lastid runs (queue_schedule_claim.lua), lastmiss (the latest tick missed).
-- Returns {status, version}: SCHEDULE.OK with the version now (0 once deleted),
--   NO_SUCH_SCHEDULE (update, pause, resume, delete), EXISTS (create).
--! include common.lua
--! include status.lua
--! include queue_common.lua
local action, key, name = ARGV[7], ARGV[8], ARGV[9]
local exists = redis.call('EXISTS', key) == 1
if action == 'create' and exists then
  return {SCHEDULE.EXISTS, tonumber(redis.call('HGET', key, 'ver'))}
end
if action ~= 'create' and not exists then
  return {SCHEDULE.NO_SUCH_SCHEDULE, 0}
end
if action == 'delete' then
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[10], name)
  return {SCHEDULE.OK, 0}
end
local was_paused = redis.call('HGET', key, 'paused') == '1'
local paused = was_paused
if action == 'pause' or action == 'resume' then
  paused = action == 'pause'
  if paused == was_paused then
    return {SCHEDULE.OK, tonumber(redis.call('HGET', key, 'ver'))}
  end
elseif ARGV[11] ~= '' then
  paused = ARGV[11] == '1'
end
local now_ms = clock()
if action == 'create' then
  redis.call('HSET', key, 'created', fmt(now_ms), 'runs', 0)
end
if action == 'create' or action == 'update' then
  redis.call('HDEL', key, 'cron', 'tz', 'every', 'anchor')
  redis.call('HSET', key, unpack(ARGV, 12))
end
local version = redis.call('HINCRBY', key, 'ver', 1)
redis.call('HSET', key, 'paused', paused and '1' or '0', 'updated', fmt(now_ms))
if paused then
  redis.call('HDEL', key, 'next')
  redis.call('ZADD', KEYS[10], '+inf', name)
else
  redis.call('HSET', key, 'next', ARGV[10])
  redis.call('ZADD', KEYS[10], ARGV[10], name)
end
return {SCHEDULE.OK, version}
