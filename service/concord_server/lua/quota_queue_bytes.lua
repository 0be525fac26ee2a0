-- quota_queue_bytes.lua: how many bytes of task payloads and types a queue holds
-- (quotas.py), reading nothing else and changing nothing.
-- KEYS: a queue's keys (keys.QueueKeys: 2 since (every ready task), 3 delayed, 4 leased, 5 dead, 8 done)
-- ARGV[1] task hash key prefix   ARGV[2] sample size S
-- Returns the bytes: exact for a state with at most S tasks, else S random tasks'
-- bytes scaled to the state's count.
local prefix, sample = ARGV[1], tonumber(ARGV[2])
local bytes = 0
for _, i in ipairs({2, 3, 4, 5, 8}) do
  local n = redis.call('ZCARD', KEYS[i])
  if n > 0 then
    local ids
    if n <= sample then
      ids = redis.call('ZRANGE', KEYS[i], 0, -1)
    else
      ids = redis.call('ZRANDMEMBER', KEYS[i], sample)
    end
    local sum = 0
    for _, id in ipairs(ids) do
      sum = sum + redis.call('HSTRLEN', prefix .. id, 'payload') + redis.call('HSTRLEN', prefix .. id, 'type')
    end
    bytes = bytes + math.floor(sum * n / #ids)
  end
end
return bytes
