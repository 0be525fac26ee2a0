-- lock_common.lua: helpers prepended to every lock_*.lua (and election_*.lua) script.
--
-- Every single-lock script takes the same KEYS (keys.LockKeys), all under one hash tag:
--   KEYS[1] holder   hash    lease, owner, fence; PEXPIRE = the lock's TTL
--   KEYS[2] queue    zset    waiter lease -> arrival time in us (FIFO order)
--   KEYS[3] waiters  hash    waiter lease -> "deadline_ms proc n ttl_ms owner" (waiting.lua);
--                            n is how many locks the waiter asks for at once: 1, or
--                            more for an AcquireMany (lock_acquire_many.lua)
--   KEYS[4] procs    hash    server process id -> alive-until ms
--   KEYS[5] fence    string  last fencing token handed out
-- and starts its ARGV with the same two values:
--   ARGV[1] wake-up channel (shard channel in the same slot)
--   ARGV[2] how long the fence key outlives its last grant, ms
-- Scripts over several locks (lock_*_many.lua) pass five KEYS per lock; the helpers
-- below take the lock's keys as a table (lock_at) and its channel.

-- The keys of the lock whose five KEYS follow KEYS[base]; a table waiting.lua's
-- queue helpers take too.
local function lock_at(base)
  return {holder = KEYS[base + 1], queue = KEYS[base + 2], waiters = KEYS[base + 3], procs = KEYS[base + 4],
          fence = KEYS[base + 5]}
end

-- The next fencing token: above the last one and at least the server clock in us,
-- so tokens keep increasing even when the fence key was lost (expiry, empty Redis).
local function next_fence_of(L, now_us)
  local last = tonumber(redis.call('GET', L.fence) or '0')
  local f = math.max(last + 1, now_us)
  redis.call('SET', L.fence, fmt(f), 'PX', ARGV[2])
  return f
end

local function grant_of(L, lease, owner, ttl_ms, now_us)
  local f = next_fence_of(L, now_us)
  redis.call('HSET', L.holder, 'lease', lease, 'owner', owner, 'fence', fmt(f))
  redis.call('PEXPIRE', L.holder, ttl_ms)
  return f
end

-- Hands a free lock to the first live single waiter and tells its server on the
-- channel ("lease fence expires_ms"). A waiter for several locks ahead of it is
-- told to try ("lease try": it takes all its locks in its own script, or none) and
-- passed over: it never holds or reserves a part while it waits. Returns the grant's
-- message if someone got the lock, else false. ``waker``, when given, is the process
-- that ran this script and wakes a waiter of its own with that message at once: such
-- a waiter's grant is not published (a local handoff costs Redis no PUBLISH and the
-- server no pub/sub message to read and drop; if the reply never reaches the waker,
-- the waiter's poll finds the grant).
local function grant_next_of(L, channel, now_ms, now_us, waker)
  local at = 0
  while true do
    local id = redis.call('ZRANGE', L.queue, at, at)[1]
    if not id then
      return false
    end
    local n, ttl, owner, proc = live(L, redis.call('HGET', L.waiters, id), now_ms)
    if not n then
      remove(L, id)
    elseif n > 1 then
      redis.call('SPUBLISH', channel, id .. ' try')
      at = at + 1
    else
      remove(L, id)
      local f = grant_of(L, id, owner, ttl, now_us)
      local message = id .. ' ' .. fmt(f) .. ' ' .. fmt(now_ms + ttl)
      if proc ~= waker then
        redis.call('SPUBLISH', channel, message)
      end
      return message
    end
  end
end

-- The single lock of KEYS[1..5] and ARGV[1].
local Q = lock_at(0)

local function grant(lease, owner, ttl_ms, now_us)
  return grant_of(Q, lease, owner, ttl_ms, now_us)
end

local function grant_next(now_ms, now_us, waker)
  return grant_next_of(Q, ARGV[1], now_ms, now_us, waker)
end
