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
--   KEYS[8] done     zset    task id -> finished ms: retained succeeded and cancelled tasks
--   KEYS[9] policy   hash    the queue's policy; absent fields take the defaults below
--   KEYS[10] schedules zset  schedule name -> next tick ms (+inf while paused);
--           each schedule's hash is built from a prefix in ARGV (queue_schedule.lua)
--   KEYS[11] events  stream  "<n>-0" -> one task event (see event below), the latest
--           ke of them (policy; at least that many: trimmed by whole nodes)
--   KEYS[12] event-seq string the last event's n
-- Task hashes ("<task prefix><id>") and dedupe keys are built from ARGV prefixes that
-- carry the same hash tag, so every script still touches one slot.
-- and starts its ARGV with the same four values:
--   ARGV[1] wake-up channel (shard channel in the same slot): "<n>" when n tasks became
--           ready, "due <ms>" when a task will become ready in ms
--   ARGV[2] finished channel (same slot): "<task id>" when that task finished (WaitTask),
--           "*" when tasks were deleted in bulk
--   ARGV[3] task hash key prefix
--   ARGV[4] priority weight, ms: how much earlier a task counts per priority step
--           (2^43 for strict priority; the aging interval otherwise)
-- A task hash holds: type payload prio att max enq ready state lease err dk dw, and
-- once they happen: lat (leased at), prog pj pt (progress value, JSON, at), res rct
-- (result, its type), fin (finished at), why (dead: the rule that ended it); the
-- retry fields the task set for itself: bk bb bc bj (see backoff_ms); and, for a
-- task a schedule enqueued, sch sat (the schedule's name, the tick's time).
-- state is ready | delayed | leased | dead | succeeded | cancelled.
--
-- Retention (KEYS[9]): sn/sa keep at most sn succeeded or cancelled tasks for sa ms
-- (-1 / 0: no limit), dn/da the same for dead ones. A retained task's hash expires by
-- itself after the age limit; the sets' entries are trimmed by sweep.
-- Retry: ma (max attempts of tasks enqueued without one), bk bb bc bj (backoff kind
-- fixed | exp, initial ms, cap ms, full jitter 1 | 0), each overridden by the task's own.
-- Events: ke, how many task events the events stream keeps (0: none are recorded).

local CHANNEL, FINISHED, TASK, WEIGHT = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local SWEEP_BATCH = 1000
local RETAIN_DEFAULTS = {sn = 1000, sa = 86400000, dn = -1, da = 0}
local DEFAULT_MAX_ATTEMPTS = 3
local RETRY_FIELDS = {'bk', 'bb', 'bc', 'bj'}
local DEFAULT_KEEP_EVENTS = 1000
-- Read once per script, on first use: a batch of tasks pays for them once.
local keep_events = nil
local events_rung = false
-- Per finished set: {most kept, age limit, entries now}, read by a script's first retire;
-- nothing else changes the set after that in a script that retires (sweep trims first).
local retained = {}

local function task_key(id)
  return TASK .. id
end

-- A task event for WatchQueue: kind (enqueued leased progress succeeded failed dead
-- cancelled released retried), the task, the time, then field, value pairs: a
-- attempt, ty type, r ready at, e error, w dead reason, pv pj progress, s schedule.
-- Numbered in order so a watcher can tell a gap; the stream's own name is the shard
-- channel that rings watchers. One ring a script is enough: a watcher reads the stream
-- only after the script, so it finds every event the script added.
local function event(now_ms, kind, id, ...)
  if keep_events == nil then
    keep_events = tonumber(redis.call('HGET', KEYS[9], 'ke') or DEFAULT_KEEP_EVENTS)
  end
  if keep_events > 0 then
    local n = redis.call('INCR', KEYS[12])
    redis.call('XADD', KEYS[11], 'MAXLEN', '~', keep_events, n .. '-0', 'k', kind, 'id', id, 't', fmt(now_ms), ...)
    if not events_rung then
      redis.call('SPUBLISH', KEYS[11], n)
      events_rung = true
    end
  end
end

local function make_ready(id, ready_ms, prio)
  redis.call('ZADD', KEYS[1], fmt(ready_ms - prio * WEIGHT), id)
  redis.call('ZADD', KEYS[2], fmt(ready_ms), id)
  redis.call('HSET', task_key(id), 'state', 'ready', 'ready', fmt(ready_ms))
end

-- A new task, ready at at_ms (now or later; the caller announces it), enqueued by
-- the schedule named (or ''); its hash also holds `more` (a flat list of field,
-- value). Returns its id and whether it is ready now.
local function add_task(ttype, payload, prio, max, at_ms, now_ms, schedule, more)
  local id = string.format('%012x', redis.call('INCR', KEYS[6]))
  local later = at_ms > now_ms
  -- the whole hash in one HSET: a batch pays one call per task for it
  local fields = {'type', ttype, 'payload', payload, 'prio', prio, 'att', 0, 'max', max, 'enq', fmt(now_ms),
    'state', later and 'delayed' or 'ready', 'ready', fmt(later and at_ms or now_ms)}
  for _, v in ipairs(more) do
    fields[#fields + 1] = v
  end
  if schedule ~= '' then
    fields[#fields + 1] = 'sch'
    fields[#fields + 1] = schedule
    event(now_ms, 'enqueued', id, 'ty', ttype, 'r', fmt(math.max(at_ms, now_ms)), 's', schedule)
  else
    event(now_ms, 'enqueued', id, 'ty', ttype, 'r', fmt(math.max(at_ms, now_ms)))
  end
  redis.call('HSET', task_key(id), unpack(fields))
  if later then
    redis.call('ZADD', KEYS[3], fmt(at_ms), id)
    return id, false
  end
  redis.call('ZADD', KEYS[1], fmt(now_ms - prio * WEIGHT), id)
  redis.call('ZADD', KEYS[2], fmt(now_ms), id)
  return id, true
end

-- The task no longer counts as pending for its dedupe key: the key lives on for the
-- task's dedupe window, then frees the key for a new task. dk and dw: the task's, when
-- the caller has read them already.
local function release_dedupe(id, dk, dw)
  if dk == nil then
    dk, dw = unpack(redis.call('HMGET', task_key(id), 'dk', 'dw'))
  end
  if dk and dk ~= '' and redis.call('GET', dk) == id then
    if tonumber(dw) > 0 then
      redis.call('PEXPIRE', dk, dw)
    else
      redis.call('DEL', dk)
    end
  end
end

-- The task is gone: deleted, not retained (purge, cancelling a dead task).
local function forget(id)
  release_dedupe(id)
  redis.call('DEL', task_key(id))
end

-- The retention of finished tasks of one kind ('s' succeeded and cancelled, 'd' dead):
-- most kept (-1: no limit), ms each is kept (0: no limit).
local function retention(kind)
  local n, age = unpack(redis.call('HMGET', KEYS[9], kind .. 'n', kind .. 'a'))
  return tonumber(n or RETAIN_DEFAULTS[kind .. 'n']), tonumber(age or RETAIN_DEFAULTS[kind .. 'a'])
end

-- Drops a finished set's entries older than age ms (0: none) and its oldest ones
-- beyond n (-1: none), with their hashes.
local function trim(set, n, age, now_ms)
  if age > 0 then
    local old = redis.call('ZRANGEBYSCORE', set, '-inf', now_ms - age, 'LIMIT', 0, SWEEP_BATCH)
    for _, id in ipairs(old) do
      redis.call('ZREM', set, id)
      redis.call('DEL', task_key(id))
    end
  end
  if n >= 0 then
    local extra = math.min(redis.call('ZCARD', set) - n, SWEEP_BATCH)
    if extra > 0 then
      local popped = redis.call('ZPOPMIN', set, extra)
      for i = 1, #popped, 2 do
        redis.call('DEL', task_key(popped[i]))
      end
    end
  end
end

-- The task finished (dead says which kind: dead, or succeeded or cancelled): set its
-- hash's fields (a flat list of field, value: its state and what goes with it), keep
-- it under the queue's retention or delete it, and tell WaitTask. dk, dw: as for
-- release_dedupe. Entries past the age limit were trimmed by this script's sweep;
-- the count limit is kept here, the set's size read once a script.
local function retire(id, dead, now_ms, fields, dk, dw)
  release_dedupe(id, dk, dw)
  local k = task_key(id)
  local set, kind = KEYS[8], 's'
  if dead then
    set, kind = KEYS[5], 'd'
  end
  local r = retained[set]
  if r == nil then
    local n, age = retention(kind)
    r = {n, age, n > 0 and redis.call('ZCARD', set) or 0}
    retained[set] = r
  end
  local n, age = r[1], r[2]
  if n == 0 then
    redis.call('DEL', k)
  else
    fields[#fields + 1] = 'fin'
    fields[#fields + 1] = fmt(now_ms)
    redis.call('HSET', k, unpack(fields))
    redis.call('HDEL', k, 'lease')
    r[3] = r[3] + redis.call('ZADD', set, fmt(now_ms), id)
    if age > 0 then
      redis.call('PEXPIRE', k, age)
    end
    if n > 0 and r[3] > n then
      local popped = redis.call('ZPOPMIN', set, r[3] - n)
      for i = 1, #popped, 2 do
        redis.call('DEL', task_key(popped[i]))
      end
      r[3] = n
    end
  end
  redis.call('SPUBLISH', FINISHED, id)
end

-- The policy as queue_policy.lua returns it.
local function policy_reply()
  local sn, sa = retention('s')
  local dn, da = retention('d')
  local r = redis.call('HMGET', KEYS[9], 'ma', unpack(RETRY_FIELDS))
  return {sn, sa, dn, da, tonumber(r[1] or DEFAULT_MAX_ATTEMPTS), r[2] or '', r[3] or '', r[4] or '', r[5] or '',
    tonumber(redis.call('HGET', KEYS[9], 'ke') or DEFAULT_KEEP_EVENTS)}
end

-- why: the rule that ended it ('attempts', 'lease', 'not_retryable').
local function kill(id, err, why, now_ms)
  event(now_ms, 'dead', id, 'a', redis.call('HGET', task_key(id), 'att'), 'e', err, 'w', why)
  retire(id, true, now_ms, {'state', 'dead', 'err', err, 'why', why})
end

-- What the clock alone changes: due delayed tasks become ready (ordered by when
-- they were due, not by when this ran), and expired leases (a worker that died)
-- make their task ready for the next attempt, or dead when it has none left.
-- Returns how many tasks became ready.
local function sweep(now_ms)
  -- Finished tasks past their age limit (their hashes expired by themselves), first:
  -- retire counts a set's entries after this.
  local sa, da = unpack(redis.call('HMGET', KEYS[9], 'sa', 'da'))
  trim(KEYS[8], -1, tonumber(sa or RETAIN_DEFAULTS.sa), now_ms)
  trim(KEYS[5], -1, tonumber(da or RETAIN_DEFAULTS.da), now_ms)
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
    local err = 'lease expired: the worker did not finish the task in time'
    if tonumber(att) >= tonumber(max) then
      kill(id, err, 'lease', now_ms)
    else
      event(now_ms, 'failed', id, 'a', att, 'e', err, 'r', fmt(now_ms))
      make_ready(id, now_ms, tonumber(prio))
      n = n + 1
    end
  end
  return n
end

-- ms before the retry of a task that failed attempt `att`: the task's own retry
-- fields, else the queue's, else the server's (exponential from base_ms, capped at
-- cap_ms, no jitter). rand in [0, 1) comes from the caller: scripts' math.random is
-- seeded alike on every run.
local function backoff_ms(id, att, base_ms, cap_ms, rand)
  local own = redis.call('HMGET', task_key(id), unpack(RETRY_FIELDS))
  local queue = redis.call('HMGET', KEYS[9], unpack(RETRY_FIELDS))
  local kind = own[1] or queue[1] or 'exp'
  local initial = tonumber(own[2] or queue[2] or base_ms)
  local cap = tonumber(own[3] or queue[3] or cap_ms)
  local delay = initial
  if kind == 'exp' then
    delay = math.min(cap, initial * 2 ^ (att - 1))
  end
  if (own[4] or queue[4]) == '1' then
    delay = math.floor(delay * rand)
  end
  return delay
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
-- enq ready err sch sat (lease fields empty / -1 when not leased; sch sat, the
-- schedule and tick that enqueued it, empty if none).
local REPLY_FIELDS = {'type', 'payload', 'prio', 'state', 'att', 'max', 'lease', 'enq', 'ready', 'err', 'sch', 'sat'}

-- About how many bytes a leased task adds to a reply: its variable fields, plus
-- TASK_OVERHEAD for the id, lease, queue name and numbers (primitives/queue.py
-- reply_bytes counts the same way).
local TASK_OVERHEAD = 1024
local function task_bytes(id)
  local k = task_key(id)
  return TASK_OVERHEAD + redis.call('HSTRLEN', k, 'payload') + redis.call('HSTRLEN', k, 'type')
    + redis.call('HSTRLEN', k, 'err') + redis.call('HSTRLEN', k, 'sch')
end

-- The reply of a task whose REPLY_FIELDS (in that order) are f.
local function reply_of(id, f, lease_expires)
  return {id, f[1], f[2], f[3], f[4], f[5], f[6], f[7] or '', lease_expires, f[8], f[9], f[10] or '', f[11] or '',
    f[12] or ''}
end

local function task_reply(id)
  return reply_of(id, redis.call('HMGET', task_key(id), unpack(REPLY_FIELDS)),
    redis.call('ZSCORE', KEYS[4], id) or '-1')
end

-- All GetTask shows: task_reply, then lat prog pj pt res rct fin why bk bb bc bj
-- ('' when unset).
local function task_detail(id)
  local reply = task_reply(id)
  local f = redis.call('HMGET', task_key(id), 'lat', 'prog', 'pj', 'pt', 'res', 'rct', 'fin', 'why', 'bk', 'bb',
    'bc', 'bj')
  for i = 1, 12 do
    reply[#reply + 1] = f[i] or ''
  end
  return reply
end
