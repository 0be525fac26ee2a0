-- lock_common.lua: helpers prepended to every lock_*.lua script.
--
-- Every lock script takes the same KEYS (keys.LockKeys), all under one hash tag:
--   KEYS[1] holder   hash    lease, owner, fence; PEXPIRE = the lock's TTL
--   KEYS[2] queue    zset    waiter lease -> arrival time in us (FIFO order)
--   KEYS[3] waiters  hash    waiter lease -> "ttl_ms deadline_ms proc owner"
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

-- Hands a free lock to the first live waiter and tells its server on the channel
-- ("lease fence expires_ms"). Waiters past their deadline, or whose server process
-- stopped heartbeating, are dropped on the way. Returns true if someone got it.
local function grant_next(now_ms, now_us)
  while true do
    local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    if not head then
      return false
    end
    local info = redis.call('HGET', KEYS[3], head)
    redis.call('ZREM', KEYS[2], head)
    redis.call('HDEL', KEYS[3], head)
    if info then
      local ttl, deadline, proc, owner = string.match(info, '^(%d+) (%d+) (%S+) (.*)$')
      local alive = tonumber(redis.call('HGET', KEYS[4], proc) or '0')
      if tonumber(deadline) > now_ms and alive > now_ms then
        local f = grant(head, owner, ttl, now_us)
        redis.call('SPUBLISH', ARGV[1], head .. ' ' .. fmt(f) .. ' ' .. fmt(now_ms + tonumber(ttl)))
        return true
      end
    end
  end
end
