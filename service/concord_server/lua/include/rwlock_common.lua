-- rwlock_common.lua: helpers for every rwlock_*.lua script (after common.lua and waiting.lua).
--
-- Every read-write lock script takes the same KEYS (keys.RWLockKeys), under one hash tag:
--   KEYS[1] holders  zset    holder lease -> expires at, ms (each holder has its own TTL)
--   KEYS[2] info     hash    holder lease -> "mode fence owner"
--   KEYS[3] queue    zset    waiter lease -> arrival time in us (FIFO order)
--   KEYS[4] waiters  hash    waiter lease -> "deadline_ms proc mode ttl_ms owner" (waiting.lua;
--                            the mode sits where a semaphore keeps its permits)
--   KEYS[5] procs    hash    server process id -> alive-until ms
--   KEYS[6] fence    string  last fencing token handed out, to readers and writers alike
-- and starts its ARGV with the same two values:
--   ARGV[1] wake-up channel (shard channel in the same slot)
--   ARGV[2] how long the fence key outlives its last grant, ms
--
-- Modes are the proto's: 1 read (shared), 2 write (exclusive). The holders are either
-- one writer or any number of readers, never both. Every script first sweeps holders
-- whose TTL ran out (sweep), so the holders it sees are the live ones.

local READ, WRITE = 1, 2

-- The next fencing token: above the last one and at least the server clock in us,
-- so tokens keep increasing even when the fence key was lost (expiry, empty Redis).
local function next_fence(now_us)
  local last = tonumber(redis.call('GET', KEYS[6]) or '0')
  local f = math.max(last + 1, now_us)
  redis.call('SET', KEYS[6], fmt(f), 'PX', ARGV[2])
  return f
end

-- The holders' keys live as long as their longest holder may, then vanish by themselves.
local function keep_holders(ms)
  for i = 1, 2 do
    if redis.call('PTTL', KEYS[i]) < ms then
      redis.call('PEXPIRE', KEYS[i], ms)
    end
  end
end

-- The queue's keys outlive their last waiter's deadline (and its process's liveness).
local function keep_queue(ms)
  for i = 3, 5 do
    if redis.call('PTTL', KEYS[i]) < ms then
      redis.call('PEXPIRE', KEYS[i], ms)
    end
  end
end

-- A holder's mode, fence and owner (nil if the lease holds nothing).
local function holder_info(lease)
  local info = redis.call('HGET', KEYS[2], lease)
  if not info then
    return nil
  end
  local mode, fence, owner = string.match(info, '^(%d) (%d+) (.*)$')
  return tonumber(mode), tonumber(fence), owner
end

-- Drops the holders whose TTL has run out.
local function sweep(now_ms)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms)
  if #gone == 0 then
    return
  end
  for _, lease in ipairs(gone) do
    redis.call('HDEL', KEYS[2], lease)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
end

-- The mode the lock is held in now: 0 free, READ or WRITE (after sweep).
local function held_mode()
  local first = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not first then
    return 0
  end
  return (holder_info(first)) or 0
end

-- Whether a request in mode `want` fits beside holders in mode `held`.
local function compatible(held, want)
  return held == 0 or (held == READ and want == READ)
end

local function grant(lease, mode, ttl_ms, owner, now_ms, now_us)
  local f = next_fence(now_us)
  redis.call('ZADD', KEYS[1], now_ms + ttl_ms, lease)
  redis.call('HSET', KEYS[2], lease, mode .. ' ' .. fmt(f) .. ' ' .. owner)
  keep_holders(ttl_ms)
  return f
end

-- lease must be a live holder.
local function release(lease)
  redis.call('ZREM', KEYS[1], lease)
  redis.call('HDEL', KEYS[2], lease)
end

local Q = {queue = KEYS[3], waiters = KEYS[4], procs = KEYS[5]}

-- Grants queued waiters in FIFO order while the head fits beside the holders: a
-- writer only when nobody holds, a reader while no writer does. The head blocks
-- everyone behind it, so a writer queued behind readers is not overtaken by readers
-- that came later, and the readers queued behind a writer enter together once it is
-- gone. Each grant publishes "lease fence expires_ms". Call it after sweep.
local function grant_next(now_ms, now_us)
  local held = held_mode()
  while held ~= WRITE do
    local id, want, ttl, owner = head(Q, now_ms)
    if not id or not compatible(held, want) then
      return
    end
    remove(Q, id)
    local f = grant(id, want, ttl, owner, now_ms, now_us)
    redis.call('SPUBLISH', ARGV[1], id .. ' ' .. fmt(f) .. ' ' .. fmt(now_ms + ttl))
    held = want
  end
end
