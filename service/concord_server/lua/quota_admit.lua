-- quota_admit.lua: charge (or adjust) a tenant's storage account (quotas.py).
-- KEYS[1] usage hash: queue name -> bytes counted for it, '*' -> their total
-- ARGV[1] quota in bytes (0: no check, just adjust)   ARGV[2] queue   ARGV[3] bytes (may be negative)
-- Returns {1, total after} when applied, {0, total} when the charge would pass the quota
-- (nothing changed). A queue's field that falls to 0 or below is removed, and the
-- total moved by what it held, so measuring a gone queue leaves nothing.
local quota, queue, delta = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local total = tonumber(redis.call('HGET', KEYS[1], '*') or 0)
if quota > 0 and delta > 0 and total + delta > quota then
  return {0, total}
end
local now = redis.call('HINCRBY', KEYS[1], queue, delta)
if now <= 0 then
  redis.call('HDEL', KEYS[1], queue)
  delta = delta - now
end
total = redis.call('HINCRBY', KEYS[1], '*', delta)
if total <= 0 then
  redis.call('DEL', KEYS[1])
  total = 0
end
return {1, total}
