-- history_lease.lua: who samples the queues' histories now (console/sampler.py): one
-- process at a time holds this lease, renewing it each tick.
-- KEYS[1] the lease (string: the holder's process id, PX the TTL)
-- ARGV[1] process id   ARGV[2] TTL ms   ARGV[3] 'take' (take it if free, or renew ours) | 'drop'
-- Returns 1 if this process holds the lease now (take), or dropped it (drop); else 0.
local holder = redis.call('GET', KEYS[1])
if ARGV[3] == 'drop' then
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  return 0
end
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
