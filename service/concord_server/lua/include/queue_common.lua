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
--   KEYS[13] lanes   zset    lane -> pass: the lanes that may lease now (see Flow control)
--   KEYS[14] held    zset    group -> ms it may lease again (its rate limit is spent)
--   KEYS[15] groups  zset    group -> 0: the groups with ready or leased tasks or settings
--   KEYS[16] flow    hash    the state flow control keeps: qt (the queue's GCRA time), vt
--           (the pass served last), lp (the queue's own lane's pass), qh (the queue-wide
--           rule that last held tasks back, for its event)
-- Task hashes ("<task prefix><id>") and dedupe keys are built from ARGV prefixes that
-- carry the same hash tag, so every script still touches one slot.
-- and starts its ARGV with the same six values:
--   ARGV[1] wake-up channel (shard channel in the same slot): "<n>" when n tasks became
--           ready, "due <ms>" when a task will become ready in ms
--   ARGV[2] finished channel (same slot): "<task id>" when that task finished (WaitTask),
--           "*" when tasks were deleted in bulk
--   ARGV[3] task hash key prefix
--   ARGV[4] priority weight, ms: how much earlier a task counts per priority step
--           (2^43 for strict priority; the aging interval otherwise)
--   ARGV[5] group hash key prefix   ARGV[6] group ready zset key prefix (+ group name)
-- A task hash holds: type payload prio att max enq ready state lease err dk dw grp, and
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
-- Flow control: qc (most tasks leased at once), qr qp qb (leases per period: count,
-- period ms, burst), gc gr gp gb (the same for each group, unless the group says
-- otherwise); the state they keep is in KEYS[16].
-- A group's hash holds its own c w rr rp rb (cap, weight, rate; absent: the queue's
-- gc, weight 1, gr gp gb), p ("1" paused), n (tasks leased now), pass, t (GCRA time).

local CHANNEL, FINISHED, TASK, WEIGHT = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local GROUP, GROUP_READY = ARGV[5], ARGV[6]
local SWEEP_BATCH = 1000
local RETAIN_DEFAULTS = {sn = 1000, sa = 86400000, dn = -1, da = 0}
local DEFAULT_MAX_ATTEMPTS = 3
local RETRY_FIELDS = {'bk', 'bb', 'bc', 'bj'}
local FLOW_FIELDS = {'qc', 'qr', 'qp', 'qb', 'gc', 'gr', 'gp', 'gb'}
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
-- cancelled released retried held), the task ('' for held), the time, then field, value
-- pairs: a attempt, ty type, r ready at, e error, w dead reason, pv pj progress, s
-- schedule, g group and h the rule holding its ready tasks back (held; g '' for the
-- whole queue's rules).
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

-- Flow control. Ready tasks wait in lanes, each in Dequeue order: the queue's own lane
-- (tasks with no group; KEYS[1], named '') and one per group (GROUP_READY .. name).
-- KEYS[13] holds the lanes that have ready tasks and may lease now, scored by their pass
-- (stride scheduling): Dequeue serves the lowest pass, and a lease adds 1/weight to it,
-- so busy lanes take turns in proportion to their weights, and a lane that comes back
-- joins at vt (the pass served last) instead of with credit saved up while it was idle.
-- A lane with ready tasks that is not in KEYS[13] waits on one of its group's rules:
-- paused, at its cap (n leased), or its rate spent (KEYS[14] says until when). KEYS[13]
-- is a hint checked at each pick: a lane found blocked there is set aside then.

local function paused()
  return redis.call('EXISTS', KEYS[7]) == 1
end

local function lane_key(g)
  if g == '' then
    return KEYS[1]
  end
  return GROUP_READY .. g
end

-- A group's rules, read once a script: cap (-1: none), weight, rate ({count, period
-- ms, burst} or nil), paused, n (leased now), t (GCRA time). The queue's lane has none.
local rules_cache = {}
local group_defaults = nil
local function rules(g)
  local r = rules_cache[g]
  if r then
    return r
  end
  if g == '' then
    r = {cap = -1, weight = 1, paused = false, n = 0}
  else
    if group_defaults == nil then
      group_defaults = redis.call('HMGET', KEYS[9], 'gc', 'gr', 'gp', 'gb')
    end
    local d = group_defaults
    local own = redis.call('HMGET', GROUP .. g, 'c', 'w', 'rr', 'rp', 'rb', 'p', 'n', 't')
    r = {cap = tonumber(own[1] or d[1] or -1), weight = tonumber(own[2] or 1), paused = own[6] == '1',
         n = tonumber(own[7] or 0), t = own[8]}
    if own[3] then
      r.rate = {tonumber(own[3]), tonumber(own[4]), tonumber(own[5])}
    elseif d[2] then
      r.rate = {tonumber(d[2]), tonumber(d[3]), tonumber(d[4])}
    end
  end
  rules_cache[g] = r
  return r
end

-- GCRA, as ratelimit_common.lua's: T = period / count is how long one lease takes to
-- come back, tau = T * burst how far ahead of now the schedule may run; tat is when the
-- limit would be full again. Returns how many of `want` leases fit now, tat after them,
-- and the ms until one more would fit.
local function gcra_fit(tat, now, rate, want)
  local T = rate[2] / rate[1]
  local tau = T * rate[3]
  tat = math.max(tonumber(tat or 0), now)
  local fit = math.max(0, math.min(want, math.floor((now + tau - tat) / T + 1e-9)))
  local after = tat + fit * T
  return fit, after, math.max(1, math.ceil(after + T - tau - now))
end

-- Why the group's lane may not lease now ('' when it may): the reasons Task and
-- WatchQueue give.
local function lane_rule(g, now)
  if g == '' then
    return ''
  end
  local r = rules(g)
  if r.paused then
    return 'group_paused'
  elseif r.cap >= 0 and r.n >= r.cap then
    return 'group_capped'
  elseif r.rate and gcra_fit(r.t, now, r.rate, 1) == 0 then
    return 'group_limited'
  end
  return ''
end

-- The group's rate is spent: sweep brings its lane back when one more lease fits.
local function hold(g, now)
  local r = rules(g)
  local _, _, wait = gcra_fit(r.t, now, r.rate, 1)
  redis.call('ZADD', KEYS[14], fmt(now + wait), g)
end

local vt = nil
local function virtual_time()
  if vt == nil then
    vt = tonumber(redis.call('HGET', KEYS[16], 'vt') or 0)
  end
  return vt
end

-- A pass as ZADD takes it (fractions of 1/weight).
local function pass_fmt(x)
  return string.format('%.17g', x)
end

-- The lane has ready tasks and may lease: it takes turns again. Returns true if it
-- was out.
local awake = {}
local function wake_lane(g)
  if awake[g] or redis.call('ZSCORE', KEYS[13], g) then
    awake[g] = true
    return false
  end
  local saved = g == '' and redis.call('HGET', KEYS[16], 'lp') or redis.call('HGET', GROUP .. g, 'pass')
  redis.call('ZADD', KEYS[13], pass_fmt(math.max(tonumber(saved or 0), virtual_time())), g)
  awake[g] = true
  return true
end

-- The lane stops taking turns (empty, or held by a rule: why, for the event), keeping
-- its pass for when it comes back.
local function park_lane(g, pass, why, now)
  redis.call('ZREM', KEYS[13], g)
  if why == 'group_limited' then
    hold(g, now)
  end
  awake[g] = nil
  if g == '' then
    redis.call('HSET', KEYS[16], 'lp', pass_fmt(pass))
  else
    redis.call('HSET', GROUP .. g, 'pass', pass_fmt(pass))
  end
  if why ~= '' then
    event(now, 'held', '', 'g', g, 'h', why)
  end
end

-- Looks at a group's lane after its rules or counts changed: it takes turns if it has
-- ready tasks and may lease, and is set aside otherwise. Returns 1 if it came back.
local function review_lane(g, now)
  local ready = redis.call('ZCARD', lane_key(g)) > 0
  local why = ready and lane_rule(g, now) or ''
  if ready and why == '' then
    return wake_lane(g) and 1 or 0
  end
  local pass = redis.call('ZSCORE', KEYS[13], g)
  if pass then
    park_lane(g, tonumber(pass), why, now)
  elseif why == 'group_limited' then
    hold(g, now)
  end
  return 0
end

-- A group that holds nothing and says nothing of its own is forgotten.
local function prune_group(g, now)
  local k = GROUP .. g
  local f = redis.call('HMGET', k, 'c', 'w', 'rr', 'p', 'n', 't')
  if f[1] or f[2] or f[3] or f[4] or tonumber(f[5] or 0) > 0 or tonumber(f[6] or 0) > now
      or redis.call('ZCARD', lane_key(g)) > 0 then
    return
  end
  redis.call('DEL', k)
  redis.call('ZREM', KEYS[15], g)
  rules_cache[g] = nil
end

-- Redis's now, read once a script for the rules of lanes that gain tasks.
local lane_now = nil

-- The task (of group g) is ready in its lane, by Dequeue order.
local function lane_add(id, g, order)
  redis.call('ZADD', lane_key(g), fmt(order), id)
  if awake[g] then
    return
  end
  if g ~= '' then
    redis.call('ZADD', KEYS[15], 0, g)
  end
  lane_now = lane_now or clock()
  local why = lane_rule(g, lane_now)
  if why == '' then
    wake_lane(g)
  elseif why == 'group_limited' and not redis.call('ZSCORE', KEYS[14], g) then
    hold(g, lane_now)
  end
end

-- The ready task (of group g) leaves its lane without being leased (cancelled, purged,
-- replaced).
local function lane_remove(id, g, now)
  redis.call('ZREM', lane_key(g), id)
  redis.call('ZREM', KEYS[2], id)
  if redis.call('ZCARD', lane_key(g)) == 0 then
    local pass = redis.call('ZSCORE', KEYS[13], g)
    if pass then
      park_lane(g, tonumber(pass), '', now)
    end
    if g ~= '' then
      prune_group(g, now)
    end
  end
end

local queue_capped = nil
-- A lease of a task of group g ended (settled, expired): the group has one fewer leased,
-- which may bring its lane back. Returns how many waiters may now lease (1 or 0).
local function lease_ended(g, now)
  local freed = 0
  if g and g ~= '' then
    local r = rules(g)
    r.n = redis.call('HINCRBY', GROUP .. g, 'n', -1)
    if r.n <= 0 then
      r.n = 0
      redis.call('HDEL', GROUP .. g, 'n')
      prune_group(g, now)
    end
    freed = review_lane(g, now)
  end
  if queue_capped == nil then  -- read once a script: a batch of settles pays for it once
    queue_capped = redis.call('HEXISTS', KEYS[9], 'qc') == 1
  end
  if freed == 0 and queue_capped then
    freed = 1  -- a slot under the queue's cap
  end
  return freed
end

-- g: the task's group ('' none; nil: read it).
local function make_ready(id, ready_ms, prio, g)
  if g == nil then
    g = redis.call('HGET', task_key(id), 'grp') or ''
  end
  lane_add(id, g, ready_ms - prio * WEIGHT)
  redis.call('ZADD', KEYS[2], fmt(ready_ms), id)
  redis.call('HSET', task_key(id), 'state', 'ready', 'ready', fmt(ready_ms))
end

-- A new task, ready at at_ms (now or later; the caller announces it), enqueued by
-- the schedule named (or ''), in group g (or ''); its hash also holds `more` (a flat
-- list of field, value). Returns its id and whether it is ready now.
local function add_task(ttype, payload, prio, max, at_ms, now_ms, schedule, g, more)
  local id = string.format('%012x', redis.call('INCR', KEYS[6]))
  local later = at_ms > now_ms
  -- the whole hash in one HSET: a batch pays one call per task for it
  local fields = {'type', ttype, 'payload', payload, 'prio', prio, 'att', 0, 'max', max, 'enq', fmt(now_ms),
    'state', later and 'delayed' or 'ready', 'ready', fmt(later and at_ms or now_ms)}
  for _, v in ipairs(more) do
    fields[#fields + 1] = v
  end
  if g ~= '' then
    fields[#fields + 1] = 'grp'
    fields[#fields + 1] = g
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
  lane_add(id, g, now_ms - prio * WEIGHT)
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

-- The policy as queue_policy.lua returns it: sn sa dn da ma bk bb bc bj ke, then FLOW_FIELDS
-- ('' when unset).
local function policy_reply()
  local sn, sa = retention('s')
  local dn, da = retention('d')
  local r = redis.call('HMGET', KEYS[9], 'ma', unpack(RETRY_FIELDS))
  local reply = {sn, sa, dn, da, tonumber(r[1] or DEFAULT_MAX_ATTEMPTS), r[2] or '', r[3] or '', r[4] or '', r[5] or '',
    tonumber(redis.call('HGET', KEYS[9], 'ke') or DEFAULT_KEEP_EVENTS)}
  for _, v in ipairs(redis.call('HMGET', KEYS[9], unpack(FLOW_FIELDS))) do
    reply[#reply + 1] = v or ''
  end
  return reply
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
    local att, max, prio, g = unpack(redis.call('HMGET', task_key(id), 'att', 'max', 'prio', 'grp'))
    redis.call('HDEL', task_key(id), 'lease')
    n = n + lease_ended(g, now_ms)
    local err = 'lease expired: the worker did not finish the task in time'
    if tonumber(att) >= tonumber(max) then
      kill(id, err, 'lease', now_ms)
    else
      event(now_ms, 'failed', id, 'a', att, 'e', err, 'r', fmt(now_ms))
      make_ready(id, now_ms, tonumber(prio), g or '')
      n = n + 1
    end
  end
  -- Groups whose rate lets them lease again.
  for _, g in ipairs(redis.call('ZRANGEBYSCORE', KEYS[14], '-inf', now_ms, 'LIMIT', 0, SWEEP_BATCH)) do
    redis.call('ZREM', KEYS[14], g)
    n = n + review_lane(g, now_ms)
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
-- expiring, a group's rate letting it lease again), or -1 when nothing is scheduled.
local function next_change(now_ms)
  local best = -1
  for _, key in ipairs({KEYS[3], KEYS[4], KEYS[14]}) do
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
-- enq ready err sch sat grp (lease fields empty / -1 when not leased; sch sat, the
-- schedule and tick that enqueued it, and grp, its group: empty if none).
local REPLY_FIELDS = {'type', 'payload', 'prio', 'state', 'att', 'max', 'lease', 'enq', 'ready', 'err', 'sch', 'sat',
  'grp'}

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
    f[12] or '', f[13] or ''}
end

local function task_reply(id)
  return reply_of(id, redis.call('HMGET', task_key(id), unpack(REPLY_FIELDS)),
    redis.call('ZSCORE', KEYS[4], id) or '-1')
end

-- The queue-wide rules: {cap (-1: none), rate ({count, period ms, burst} or nil), GCRA time}.
local function queue_rules()
  local q = redis.call('HMGET', KEYS[9], 'qc', 'qr', 'qp', 'qb')
  local rate = q[2] and {tonumber(q[2]), tonumber(q[3]), tonumber(q[4])}
  return {cap = tonumber(q[1] or -1), rate = rate, t = rate and redis.call('HGET', KEYS[16], 'qt')}
end

-- Why a ready task is not leased now, by the first rule that holds it back: paused,
-- queue_capped, queue_limited, or its group's (lane_rule); '' when none does.
local function wait_reason(g, now)
  if paused() then
    return 'paused'
  end
  local q = queue_rules()
  if q.cap >= 0 and redis.call('ZCARD', KEYS[4]) >= q.cap then
    return 'queue_capped'
  elseif q.rate and gcra_fit(q.t, now, q.rate, 1) == 0 then
    return 'queue_limited'
  end
  return lane_rule(g, now)
end

-- All GetTask shows: task_reply, then lat prog pj pt res rct fin why bk bb bc bj
-- ('' when unset), then what holds it back if it is ready (wait_reason).
local function task_detail(id, now)
  local reply = task_reply(id)
  local f = redis.call('HMGET', task_key(id), 'lat', 'prog', 'pj', 'pt', 'res', 'rct', 'fin', 'why', 'bk', 'bb',
    'bc', 'bj')
  for i = 1, 12 do
    reply[#reply + 1] = f[i] or ''
  end
  reply[#reply + 1] = reply[5] == 'ready' and wait_reason(reply[15], now) or ''
  return reply
end
