-- queue_schedules.lua: read a queue's schedules (changes nothing).
-- KEYS: see queue_common.lua
-- ARGV[7] what: 'list' (by next tick, paused last), 'get' (one), 'due' (next tick at
--         or before now, at most 100)
-- ARGV[8] the schedules' hash key prefix (+ name)
-- ARGV[9] list: '' for the first page, else "<next tick> <name>" of the last one
--         listed (a schedule that ticks meanwhile may be listed again; none is
--         skipped unless changed to an earlier tick); get: the name
-- ARGV[10] list: count
-- Returns {now ms, ms until the queue's next tick (-1: none), schedules in the queue,
--   then per schedule {name, score (next tick, inf while paused), FIELDS...} ('' when unset)}
--! include common.lua
--! include queue_common.lua
local FIELDS = {'type', 'payload', 'prio', 'max', 'cron', 'tz', 'every', 'anchor', 'missed', 'grace', 'paused',
  'ver', 'next', 'created', 'updated', 'last', 'lastid', 'runs', 'lastmiss'}
local what, prefix = ARGV[7], ARGV[8]
local now_ms = clock()
local names
if what == 'list' then
  local count = tonumber(ARGV[10])
  local score, after = string.match(ARGV[9], '^(%S+) (.*)$')
  if not score then
    names = redis.call('ZRANGE', KEYS[10], 0, count - 1)
  else
    names = {}
    for _, name in ipairs(redis.call('ZRANGEBYSCORE', KEYS[10], score, score)) do
      if name > after and #names < count then
        names[#names + 1] = name
      end
    end
    if #names < count and score ~= 'inf' then
      for _, name in ipairs(redis.call('ZRANGEBYSCORE', KEYS[10], '(' .. score, '+inf', 'LIMIT', 0, count - #names)) do
        names[#names + 1] = name
      end
    end
  end
elseif what == 'get' then
  names = {}
  if redis.call('ZSCORE', KEYS[10], ARGV[9]) then
    names = {ARGV[9]}
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
  local one = {name, redis.call('ZSCORE', KEYS[10], name)}
  for i = 1, #FIELDS do
    one[i + 2] = f[i] or ''
  end
  reply[#reply + 1] = one
end
return reply
