-- queue_policy.lua: replace the queue's policy (retention of finished tasks, retry, events, flow control).
-- KEYS: see queue_common.lua
-- ARGV[7..24] sn sa dn da ma bk bb bc bj ke qc qr qp qb gc gr gp gb (see queue_common.lua); ''
--   leaves that one at its default
-- Returns as policy_reply: the policy now, retention, ma and ke filled in with the defaults,
-- the others '' when unset (the server's defaults apply, or no limit).
-- Every group is looked at again under the new rules (one step per group: an operator's
-- call, not a client's).
--! include common.lua
--! include queue_common.lua
local names = {'sn', 'sa', 'dn', 'da', 'ma', 'bk', 'bb', 'bc', 'bj', 'ke', unpack(FLOW_FIELDS)}
-- A rate that changes starts full, judged afresh: the queue's, and every group's that
-- follows the queue's.
local was = redis.call('HMGET', KEYS[9], 'qr', 'qp', 'qb', 'gr', 'gp', 'gb')
local function changed(first, argv)
  for i = 0, 2 do
    if (was[first + i] or '') ~= ARGV[argv + i] then
      return true
    end
  end
  return false
end
local queue_rate_changed, group_rate_changed = changed(1, 18), changed(4, 22)
if queue_rate_changed then
  redis.call('HDEL', KEYS[16], 'qt')
end
for i, name in ipairs(names) do
  local value = ARGV[6 + i]
  if value == '' then
    redis.call('HDEL', KEYS[9], name)
  else
    redis.call('HSET', KEYS[9], name, value)
  end
end
-- Apply a lower limit now (in bounded batches; each later script takes up the rest).
local now_ms = clock()
announce(sweep(now_ms))
local sn, sa = retention('s')
local dn, da = retention('d')
trim(KEYS[8], sn, sa, now_ms)
trim(KEYS[5], dn, da, now_ms)
redis.call('HDEL', KEYS[16], 'qh')
for _, g in ipairs(redis.call('ZRANGE', KEYS[15], 0, -1)) do
  if group_rate_changed and redis.call('HEXISTS', GROUP .. g, 'rr') == 0 then
    redis.call('HDEL', GROUP .. g, 't')
    redis.call('ZREM', KEYS[14], g)
  end
  review_lane(g, now_ms)
end
announce(redis.call('ZCARD', KEYS[2]))  -- a higher cap or rate frees waiters
return policy_reply()
