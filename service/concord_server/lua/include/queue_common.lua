-- queue_common.lua: helpers prepended to every queue_*.lua script.
--
-- Every queue script takes the same KEYS (keys.QueueKeys), all under one hash tag:
--   KEYS[1] ready    zset    task id -> order (ready_ms - priority * weight): Dequeue order
--   KEYS[2] since    zset    task id -> ready_ms (when it became ready): oldest-ready age
--   KEYS[3] delayed  zset    task id -> ready-at ms
--   KEYS[4] leased   zset    task id -> lease expiry ms
--   KEYS[5] dead     zset    task id -> died-at ms
--   KEYS[6] seq      string  last task number handed out
--   KEYS[7] paused   string  "1" while the queue is paused: nothing is leased
-- Task hashes ("<task prefix><id>") and dedupe keys are built from ARGV prefixes that
-- carry the same hash tag, so every script still touches one slot.
-- and starts its ARGV with the same three values:
--   ARGV[1] wake-up channel (shard channel in the same slot): "<n>" when n tasks became
--           ready, "due <ms>" when a task will become ready in ms
--   ARGV[2] task hash key prefix
--   ARGV[3] priority weight, ms: how much earlier a task counts per priority step
--           (2^43 for strict priority; the aging interval otherwise)
-- A task hash holds: type payload prio att max enq ready state lease err dk dw.

local CHANNEL, TASK, WEIGHT = ARGV[1], ARGV[2], tonumber(ARGV[3])
local SWEEP_BATCH = 1000

local function task_key(id)
  return TASK .. id
end

local function make_ready(id, ready_ms, prio)
  redis.call('ZADD', KEYS[1], fmt(ready_ms - prio * WEIGHT), id)
  redis.call('ZADD', KEYS[2], fmt(ready_ms), id)
  redis.call('HSET', task_key(id), 'state', 'ready', 'ready', fmt(ready_ms))
end

-- The task no longer counts as pending for its dedupe key: the key lives on for the
-- task's dedupe window, then frees the key for a new task.
local function release_dedupe(id)
  local dk, dw = unpack(redis.call('HMGET', task_key(id), 'dk', 'dw'))
  if dk and dk ~= '' and redis.call('GET', dk) == id then
    if tonumber(dw) > 0 then
      redis.call('PEXPIRE', dk, dw)
    else
      redis.call('DEL', dk)
    end
  end
end

local function finish(id)
  release_dedupe(id)
  redis.call('DEL', task_key(id))
end

local function kill(id, err, now_ms)
  redis.call('ZADD', KEYS[5], now_ms, id)
  redis.call('HSET', task_key(id), 'state', 'dead', 'err', err)
  redis.call('HDEL', task_key(id), 'lease')
  release_dedupe(id)
end

-- What the clock alone changes: due delayed tasks become ready (ordered by when
-- they were due, not by when this ran), and expired leases (a worker that died)
-- make their task ready for the next attempt, or dead when it has none left.
-- Returns how many tasks became ready.
local function sweep(now_ms)
  local n = 0
  local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now_ms, 'WITHSCORES', 'LIMIT', 0, SWEEP_BATCH)
  for i = 1, #due, 2 do
    local id = due[i]
    redis.call('ZREM', KEYS[3], id)
    make_ready(id, tonumber(due[i + 1]), tonumber(redis.call('HGET', task_key(id), 'prio')))
    n = n + 1
  end
  local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now_ms, 'LIMIT', 0, SWEEP_BATCH)
  for _, id in ipairs(expired) do
    redis.call('ZREM', KEYS[4], id)
    local att, max, prio = unpack(redis.call('HMGET', task_key(id), 'att', 'max', 'prio'))
    redis.call('HDEL', task_key(id), 'lease')
    if tonumber(att) >= tonumber(max) then
      kill(id, 'lease expired: the worker did not finish the task in time', now_ms)
    else
      make_ready(id, now_ms, tonumber(prio))
      n = n + 1
    end
  end
  return n
end

local function paused()
  return redis.call('EXISTS', KEYS[7]) == 1
end

-- n tasks became ready: ring that many waiters (none while paused; resuming rings).
local function announce(n)
  if n > 0 and not paused() then
    redis.call('SPUBLISH', CHANNEL, n)
  end
end

-- A task will be ready in delay_ms (delayed, or retried later): waiting workers
-- re-arm their timers, since they only knew of later times (or none).
local function announce_due(delay_ms)
  redis.call('SPUBLISH', CHANNEL, 'due ' .. fmt(delay_ms))
end

-- ms until the clock alone changes the queue (a delayed task due, a lease
-- expiring), or -1 when nothing is scheduled.
local function next_change(now_ms)
  local best = -1
  for _, key in ipairs({KEYS[3], KEYS[4]}) do
    local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if head[2] then
      local left = math.max(0, tonumber(head[2]) - now_ms)
      if best < 0 or left < best then
        best = left
      end
    end
  end
  return best
end

-- A task as a flat reply: id type payload prio state att max lease lease_expires_ms
-- enq ready err (lease fields empty / -1 when not leased).
local function task_reply(id)
  local f = redis.call('HMGET', task_key(id), 'type', 'payload', 'prio', 'state', 'att', 'max', 'lease', 'enq',
    'ready', 'err')
  local lease_expires = redis.call('ZSCORE', KEYS[4], id) or '-1'
  return {id, f[1], f[2], f[3], f[4], f[5], f[6], f[7] or '', lease_expires, f[8], f[9], f[10] or ''}
end
