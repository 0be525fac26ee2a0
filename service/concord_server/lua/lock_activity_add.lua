-- lock_activity_add.lua: adds what one process counted since its last beat to its key
-- space's lock activity (primitives/lock_activity.py), in the entry of the current
-- interval (Redis clock), so the console shows handoffs per second and deadlocks broken
-- summed over every replica.
-- KEYS[1] the list, newest first: "<interval start ms> <lock> <semaphore> <rwlock> <election>
--         <deadlocks>" (handoffs of each primitive, then deadlocks broken)
-- ARGV[1] interval ms   ARGV[2] entries kept   ARGV[3] the list's TTL ms
-- ARGV[4..8] the counts to add, in the entry's order
-- Returns the interval's start ms.
--! include common.lua
local now_ms = clock()
local step = tonumber(ARGV[1])
local at = now_ms - now_ms % step
local counts = {tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])}
local newest = redis.call('LINDEX', KEYS[1], 0)
local fields = {}
if newest then
  for n in string.gmatch(newest, '%d+') do
    fields[#fields + 1] = tonumber(n)
  end
end
if fields[1] == at then
  for i = 1, 5 do
    counts[i] = counts[i] + (fields[i + 1] or 0)
  end
  redis.call('LSET', KEYS[1], 0, fmt(at) .. ' ' .. table.concat(counts, ' '))
else
  redis.call('LPUSH', KEYS[1], fmt(at) .. ' ' .. table.concat(counts, ' '))
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return at
