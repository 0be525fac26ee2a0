-- queue_policy.lua: replace the queue's policy (retention of finished tasks, retry).
-- KEYS: see queue_common.lua
-- ARGV[5..14] sn sa dn da ma bk bb bc bj ke (see queue_common.lua); '' leaves that one at its default
-- Returns {sn, sa, dn, da, ma, bk, bb, bc, bj, ke}: the policy now, retention, ma and ke filled
-- in with the defaults, the others '' when unset (the server's defaults apply).
--! include common.lua
--! include queue_common.lua
local names = {'sn', 'sa', 'dn', 'da', 'ma', 'bk', 'bb', 'bc', 'bj', 'ke'}
for i, name in ipairs(names) do
  local value = ARGV[4 + i]
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
return policy_reply()
