-- queue_group.lua: a group's own rules, and what its tasks are doing.
-- KEYS: see queue_common.lua
-- ARGV[7] what: set | get | list
--   set:  ARGV[8] group, ARGV[9..13] c w rr rp rb ('' drops that override: the queue's
--         gc gr gp gb, or weight 1, apply)
--   get:  ARGV[8] group
--   list: ARGV[8] '' for the first page, else the last group listed   ARGV[9] count
-- Returns for set and get one group, for list {group, group, ...} by name, each
-- {name, ready, leased, paused 0/1, c, w, rr, rp, rb ('' when not its own), the cap
-- and rate in force (cap -1: none; rate '' when none), what holds its tasks back ('' or
-- the lane_rule)}.
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
announce(sweep(now_ms))
local OWN = {'c', 'w', 'rr', 'rp', 'rb'}

local function describe(g)
  local r = rules(g)
  local own = redis.call('HMGET', GROUP .. g, unpack(OWN))
  local rate = {'', '', ''}
  if r.rate then
    rate = {fmt(r.rate[1]), fmt(r.rate[2]), fmt(r.rate[3])}
  end
  return {g, redis.call('ZCARD', lane_key(g)), r.n, r.paused and 1 or 0, own[1] or '', own[2] or '', own[3] or '',
          own[4] or '', own[5] or '', r.cap, rate[1], rate[2], rate[3], lane_rule(g, now_ms)}
end

local what = ARGV[7]
if what == 'set' then
  local g = ARGV[8]
  local was = redis.call('HMGET', GROUP .. g, 'rr', 'rp', 'rb')
  if (was[1] or '') ~= ARGV[11] or (was[2] or '') ~= ARGV[12] or (was[3] or '') ~= ARGV[13] then
    redis.call('HDEL', GROUP .. g, 't')  -- a new rate starts full, judged afresh
  end
  for i, field in ipairs(OWN) do
    local v = ARGV[8 + i]
    if v == '' then
      redis.call('HDEL', GROUP .. g, field)
    else
      redis.call('HSET', GROUP .. g, field, v)
    end
  end
  redis.call('ZADD', KEYS[15], 0, g)
  redis.call('ZREM', KEYS[14], g)
  rules_cache[g] = nil
  if review_lane(g, now_ms) == 1 then
    announce(redis.call('ZCARD', lane_key(g)))
  end
  local reply = describe(g)
  prune_group(g, now_ms)
  return reply
elseif what == 'get' then
  return describe(ARGV[8])
end
local from = ARGV[8] == '' and '-' or '(' .. ARGV[8]
local reply = {}
for _, g in ipairs(redis.call('ZRANGE', KEYS[15], from, '+', 'BYLEX', 'LIMIT', 0, tonumber(ARGV[9]))) do
  reply[#reply + 1] = describe(g)
end
return reply
