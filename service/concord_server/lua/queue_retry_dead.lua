-- queue_retry_dead.lua: make dead tasks ready again with a fresh set of attempts.
-- KEYS: see queue_common.lua
-- ARGV[7] limit (used when no ids follow)   ARGV[8..] task ids (none: the oldest `limit`)
-- Returns how many were retried (ids that are not dead are skipped).
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
local ready = sweep(now_ms)
local ids = {}
for i = 8, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
if #ids == 0 then
  ids = redis.call('ZRANGE', KEYS[5], 0, tonumber(ARGV[7]) - 1)
end
local retried = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[5], id) == 1 then
    local k = task_key(id)
    redis.call('HSET', k, 'att', 0)
    redis.call('HDEL', k, 'fin', 'why')
    redis.call('PERSIST', k)  -- a dead task's retention age no longer applies
    local dk = redis.call('HGET', k, 'dk')
    if dk and dk ~= '' and redis.call('SET', dk, id, 'NX') == false and redis.call('GET', dk) == id then
      redis.call('PERSIST', dk)
    end
    event(now_ms, 'retried', id, 'r', fmt(now_ms))
    make_ready(id, now_ms, tonumber(redis.call('HGET', k, 'prio')))
    retried = retried + 1
  end
end
announce(ready + retried)
return retried
