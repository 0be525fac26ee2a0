-- lock_common.lua: helpers prepended to every lock_*.lua script.
--
-- Every lock script takes the same KEYS (keys.LockKeys), all under one hash tag:
--   KEYS[1] holder   hash    lease, owner, fence; PEXPIRE = the lock's TTL
--   KEYS[2] queue    zset    waiter lease -> arrival time in us (FIFO order)
--   KEYS[3] waiters  hash    waiter lease -> "deadline_ms proc 1 ttl_ms owner" (waiting.lua)
--   KEYS[4] procs    hash    server process id -> alive-until ms
--   KEYS[5] fence    string  last fencing token handed out
-- and starts its ARGV with the same two values:
--   ARGV[1] wake-up channel (shard channel in the same slot)
--   ARGV[2] how long the fence key outlives its last grant, ms

-- The next fencing token: above the last one and at least the server clock in us,
-- so tokens keep increasing even when the fence key was lost (expiry, empty Redis).
local function next_fence(now_us)
  local last = tonumber(redis.call('GET', KEYS[5]) or '0')
  local f = math.max(last + 1, now_us)
  redis.call('SET', KEYS[5], fmt(f), 'PX', ARGV[2])
  return f
end

local function grant(lease, owner, ttl_ms, now_us)
  local f = next_fence(now_us)
  redis.call('HSET', KEYS[1], 'lease', lease, 'owner', owner, 'fence', fmt(f))
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
  return f
end

local Q = {queue = KEYS[2], waiters = KEYS[3], procs = KEYS[4]}

-- Hands a free lock to the first live waiter and tells its server on the channel
-- ("lease fence expires_ms"). Returns true if someone got it.
local function grant_next(now_ms, now_us)
  local id, _, ttl, owner = head(Q, now_ms)
  if not id then
    return false
  end
  remove(Q, id)
  local f = grant(id, owner, ttl, now_us)
  redis.call('SPUBLISH', ARGV[1], id .. ' ' .. fmt(f) .. ' ' .. fmt(now_ms + ttl))
  return true
end
