-- waiting.lua: the FIFO queue of blocked callers that locks and semaphores keep.
-- Three keys, passed in by the caller (each primitive has them at its own KEYS positions):
--   queue    zset  waiter id -> arrival time in us (FIFO order)
--   waiters  hash  waiter id -> "deadline_ms proc permits ttl_ms owner"
--   procs    hash  server process id -> alive-until ms
-- A waiter is live while its deadline has not passed and its server process keeps
-- heartbeating (the poll scripts); dead ones are dropped when they reach the head.

local function enqueue(q, id, now_ms, now_us, wait_ms, proc, liveness_ms, permits, ttl_ms, owner)
  redis.call('ZADD', q.queue, 'NX', now_us, id)
  redis.call('HSET', q.waiters, id, fmt(now_ms + wait_ms) .. ' ' .. proc .. ' ' .. permits .. ' ' .. ttl_ms .. ' ' .. owner)
  redis.call('HSET', q.procs, proc, fmt(now_ms + liveness_ms))
end

-- An entry's fields if the waiter is live: permits, ttl_ms, owner, its process.
local function live(q, entry, now_ms)
  if not entry then
    return nil
  end
  local deadline, proc, permits, ttl, owner = string.match(entry, '^(%d+) (%S+) (%d+) (%d+) (.*)$')
  -- (an entry that is no waiter's, such as a semaphore's failure record, is not live)
  if deadline and tonumber(deadline) > now_ms and tonumber(redis.call('HGET', q.procs, proc) or '0') > now_ms then
    return tonumber(permits), tonumber(ttl), owner, proc
  end
  return nil
end

-- The live waiters among the first `limit` queue entries (dead ones are skipped, not
-- replaced), in FIFO order: add(permits, owner, waiting since ms) for each. Reads only
-- (the web console's bounded reads of a queue's head).
local function each_first_live(q, limit, now_ms, add)
  if limit <= 0 then
    return
  end
  local first = redis.call('ZRANGE', q.queue, 0, limit - 1, 'WITHSCORES')
  for i = 1, #first, 2 do
    local permits, _, owner = live(q, redis.call('HGET', q.waiters, first[i]), now_ms)
    if permits then
      add(permits, owner, math.floor(tonumber(first[i + 1]) / 1000))
    end
  end
end

-- With nobody queued the heartbeats mean nothing: dropping them means a wait that
-- ended leaves no key behind (heartbeat() never recreates the hash).
local function tidy(q)
  if redis.call('EXISTS', q.queue) == 0 then
    redis.call('DEL', q.procs)
  end
end

local function remove(q, id)
  redis.call('ZREM', q.queue, id)
  redis.call('HDEL', q.waiters, id)
  tidy(q)
end

-- The first live waiter (dropping dead ones before it): id, permits, ttl_ms, owner;
-- nil when nobody live waits. It stays queued until the caller removes it.
local function head(q, now_ms)
  while true do
    local id = redis.call('ZRANGE', q.queue, 0, 0)[1]
    if not id then
      return nil
    end
    local permits, ttl, owner = live(q, redis.call('HGET', q.waiters, id), now_ms)
    if permits then
      return id, permits, ttl, owner
    end
    remove(q, id)
  end
end

-- Live waiters, counted one by one up to COUNT_EXACT entries; past that the queue's
-- length (waiters of dead processes included until they reach the head): a Describe
-- of a lock with 10,000 waiters must not hold Redis for a walk over all of them.
local COUNT_EXACT = 1000

local function count_live(q, now_ms)
  if redis.call('HLEN', q.waiters) > COUNT_EXACT then
    return redis.call('ZCARD', q.queue)
  end
  local n = 0
  local entries = redis.call('HGETALL', q.waiters)
  for i = 2, #entries, 2 do
    if live(q, entries[i], now_ms) then
      n = n + 1
    end
  end
  return n
end

local function heartbeat(q, proc, now_ms, liveness_ms)
  if redis.call('EXISTS', q.procs) == 1 then
    redis.call('HSET', q.procs, proc, fmt(now_ms + liveness_ms))
  end
end

-- ms until the first holder of a zset of holders (id -> expires at ms) expires, -1
-- if none: when waiters should look again (semaphores, read-write locks).
local function next_expiry(holders, now_ms)
  local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  if #first == 0 then
    return -1
  end
  return tonumber(first[2]) - now_ms
end
