-- semaphore_common.lua: helpers for every semaphore_*.lua script (after common.lua).
--
-- Every semaphore script takes the same KEYS (keys.SemaphoreKeys), under one hash tag:
--   KEYS[1] holders  zset  permit id -> expires at, ms
--   KEYS[2] permits  hash  permit id -> "permits owner"
--   KEYS[3] queue    zset  waiter id -> arrival time in us (FIFO order)
--   KEYS[4] waiters  hash  waiter id -> "deadline_ms proc permits ttl_ms owner" (waiting.lua),
--                          or "-1" once a lowered limit failed it (FAILED, below)
--   KEYS[5] procs    hash  server process id -> alive-until ms
--   KEYS[6] meta     hash  limit (the stored one, in force), by (who stored it: 'set' by
--                          SetLimit, 'acquire' by an Acquire), held (permits held now)
-- and ARGV[1] is the wake-up channel (a shard channel in the same slot).
--
-- Every script first sweeps holders whose TTL ran out, so meta.held is always the
-- sum of the live holders' permits, and no grant takes held past the limit.
--
-- The stored limit's lifetime: one SetLimit stored (by = 'set') is kept for good (meta
-- has no expiry) until another SetLimit changes it; one an Acquire stored (the first
-- Acquire that found none, or any with --semaphore-limit-from-acquire) expires with
-- the other keys, so never before the last holder's or waiter's time is up.

-- The limit stored now; 0 when there is none.
local function stored_limit()
  return tonumber(redis.call('HGET', KEYS[6], 'limit') or '0')
end

-- Keys live as long as their longest holder or waiter may, then vanish by themselves;
-- meta too, unless it holds a limit SetLimit stored.
local function keep_for(ms)
  local last = redis.call('HGET', KEYS[6], 'by') == 'set' and 5 or 6
  for i = 1, last do
    if redis.call('PTTL', KEYS[i]) < ms then
      redis.call('PEXPIRE', KEYS[i], ms)
    end
  end
end

-- Stores the limit an Acquire brought. It expires with the other keys: a meta that
-- had none (it was kept for good, or is new) takes the latest expiry among them now,
-- and the grant or the queueing that follows extends it (keep_for).
local function store_acquired_limit(limit)
  redis.call('HSET', KEYS[6], 'limit', limit, 'by', 'acquire')
  if redis.call('PTTL', KEYS[6]) == -1 then
    local ms = 0
    for i = 1, 5 do
      ms = math.max(ms, redis.call('PTTL', KEYS[i]))
    end
    if ms > 0 then
      redis.call('PEXPIRE', KEYS[6], ms)
    end
  end
end

-- Frees the permits of holders whose TTL has run out; returns the permits held now.
local function sweep(now_ms)
  local held = tonumber(redis.call('HGET', KEYS[6], 'held') or '0')
  if held > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
    -- The holders key expired together with its last holders, taking them out of
    -- sight of this sweep: nobody holds anything, whatever the counter says.
    redis.call('HSET', KEYS[6], 'held', 0)
    redis.call('DEL', KEYS[2])
    return 0
  end
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms)
  if #gone == 0 then
    return held
  end
  for _, id in ipairs(gone) do
    local info = redis.call('HGET', KEYS[2], id)
    if info then
      held = held - tonumber(string.match(info, '^(%d+)'))
    end
    redis.call('HDEL', KEYS[2], id)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
  redis.call('HSET', KEYS[6], 'held', held)
  return held
end

local function grant(id, permits, ttl_ms, owner, now_ms, held)
  redis.call('ZADD', KEYS[1], now_ms + ttl_ms, id)
  redis.call('HSET', KEYS[2], id, permits .. ' ' .. owner)
  held = held + permits
  redis.call('HSET', KEYS[6], 'held', held)
  keep_for(ttl_ms)
  return held
end

-- id must be a live holder.
local function release(id, held)
  local info = redis.call('HGET', KEYS[2], id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  held = held - tonumber(string.match(info, '^(%d+)'))
  redis.call('HSET', KEYS[6], 'held', held)
  return held
end

local Q = {queue = KEYS[3], waiters = KEYS[4], procs = KEYS[5]}

-- A waiter a lowered limit failed leaves the queue, but its entry in the waiters hash
-- becomes this record until its caller hears (its withdraw removes it): the "-1"
-- published may be lost, or land before the caller's process subscribed, and the
-- poll must then report the failure, not a waiter dropped as dead (which would
-- queue again: refused SEMAPHORE_LIMIT_MISMATCH, or with --semaphore-limit-from-acquire
-- putting its own higher limit back in force).
local FAILED = '-1'

-- Grants queued waiters in FIFO order while the head's permits fit under the limit.
-- The head blocks everyone behind it (nobody overtakes), so a request for many
-- permits is never starved by smaller ones. One asking for more than a lowered limit
-- can never be served and is told so ("-1", and the FAILED record). Grants publish
-- "id expires_ms".
-- The grant messages grant_next published in this script, for its reply: the
-- releasing server wakes its own waiters with them at once.
local GRANTED = {}

local function grant_next(now_ms, held)
  local limit = stored_limit()
  while true do
    local id, permits, ttl, owner = head(Q, now_ms)
    if not id or (permits <= limit and held + permits > limit) then
      return held
    end
    if permits > limit then
      -- Overwriting the entry keeps the hash and its expiry (the waiter's deadline or
      -- later): the record lasts while its caller may poll, and no longer than the keys.
      redis.call('ZREM', KEYS[3], id)
      redis.call('HSET', KEYS[4], id, FAILED)
      tidy(Q)
      redis.call('SPUBLISH', ARGV[1], id .. ' -1')
    else
      remove(Q, id)
      held = grant(id, permits, ttl, owner, now_ms, held)
      GRANTED[#GRANTED + 1] = id .. ' ' .. fmt(now_ms + ttl)
      redis.call('SPUBLISH', ARGV[1], GRANTED[#GRANTED])
    end
  end
end
