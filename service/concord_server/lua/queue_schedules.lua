-- queue_schedules.lua: read a queue's schedules (changes nothing).
-- KEYS: see queue_common.lua
-- ARGV[5] what: 'list' (by next tick, paused last), 'get' (one), 'due' (next tick at
--         or before now, at most 100)
-- ARGV[6] the schedules' hash key prefix (+ name)
-- ARGV[7] list: offset; get: the name.  ARGV[8] list: count
-- Returns {now ms, ms until the queue's next tick (-1: none), schedules in the queue,
--   then per schedule {name, SCHEDULE_FIELDS...} ('' when unset)}
--! include common.lua
--! include queue_common.lua
local FIELDS = {'type', 'payload', 'prio', 'max', 'cron', 'tz', 'every', 'anchor', 'missed', 'grace', 'paused',
  'ver', 'next', 'created', 'updated', 'last', 'lastid', 'runs', 'lastmiss'}
local what, prefix = ARGV[5], ARGV[6]
local now_ms = clock()
local names
if what == 'list' then
  local offset = tonumber(ARGV[7])
  names = redis.call('ZRANGE', KEYS[10], offset, offset + tonumber(ARGV[8]) - 1)
elseif what == 'get' then
  names = {}
  if redis.call('ZSCORE', KEYS[10], ARGV[7]) then
    names = {ARGV[7]}
  end
else
  names = redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', now_ms, 'LIMIT', 0, 100)
end
local head = redis.call('ZRANGE', KEYS[10], 0, 0, 'WITHSCORES')
local left = -1
if head[2] ~= nil and head[2] ~= 'inf' then
  left = math.max(0, tonumber(head[2]) - now_ms)
end
local reply = {now_ms, left, redis.call('ZCARD', KEYS[10])}
for _, name in ipairs(names) do
  local f = redis.call('HMGET', prefix .. name, unpack(FIELDS))
  local one = {name}
  for i = 1, #FIELDS do
    one[i + 1] = f[i] or ''
  end
  reply[#reply + 1] = one
end
return reply
