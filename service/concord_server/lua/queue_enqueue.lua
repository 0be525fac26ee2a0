-- queue_enqueue.lua: add a batch of tasks, all in one atomic step.
-- KEYS: see queue_common.lua
-- ARGV[7] number of tasks, then 16 values per task:
--   type, payload, priority, delay ms (-1: none), run-at ms (-1: none),
--   dedupe key (full key name; '' for none), dedupe window ms, max attempts (0: the queue's),
--   backoff kind (fixed | exp), initial ms, cap ms, jitter (1 | 0): each '' when the queue's applies,
--   throttle key (full key name; '' for none), throttle period ms, debounce key (full key name; ''),
--   group ('' for none)
-- Returns {task id 1, how 1, task id 2, how 2, ...}: how is 0 (added), 1 (a duplicate:
-- its dedupe or throttle key names the task id) or 2 (debounced: the pending task with
-- its debounce key, the id, took this one's type, payload, priority and run time; it
-- stays in its own group).
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
local ready = sweep(now_ms)
local reply = {}
local soonest = nil
local n = tonumber(ARGV[7])
-- A debounce key outlives its task's run time by this much (a pending task that nobody
-- leases keeps taking later ones' place meanwhile; then the key frees itself).
local DEBOUNCE_LINGER_MS = 3600000
local queue_max = tonumber(redis.call('HGET', KEYS[9], 'ma') or DEFAULT_MAX_ATTEMPTS)
-- A pending task with the debounce key takes the new one's place: true if there was one.
local function debounce(id, ttype, payload, prio, at)
  local state = redis.call('HGET', task_key(id), 'state')
  if state ~= 'delayed' and state ~= 'ready' then
    return false
  end
  local g = redis.call('HGET', task_key(id), 'grp') or ''
  if state == 'ready' then
    lane_remove(id, g, now_ms)
  else
    redis.call('ZREM', KEYS[3], id)
  end
  if at > now_ms then
    redis.call('HSET', task_key(id), 'type', ttype, 'payload', payload, 'prio', prio, 'state', 'delayed',
               'ready', fmt(at))
    redis.call('ZADD', KEYS[3], fmt(at), id)
    soonest = math.min(soonest or at, at)
  else
    redis.call('HSET', task_key(id), 'type', ttype, 'payload', payload, 'prio', prio)
    make_ready(id, now_ms, prio, g)
    ready = ready + 1
  end
  return true
end

for i = 0, n - 1 do
  local base = 8 + i * 16
  local ttype, payload, prio = ARGV[base], ARGV[base + 1], tonumber(ARGV[base + 2])
  local delay, run_at = tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  local dk, dw, max = ARGV[base + 5], ARGV[base + 6], tonumber(ARGV[base + 7])
  if max == 0 then
    max = queue_max
  end
  local tk, tms, bk, g = ARGV[base + 12], tonumber(ARGV[base + 13]), ARGV[base + 14], ARGV[base + 15]
  local at = now_ms
  if delay >= 0 then
    at = now_ms + delay
  elseif run_at >= 0 then
    at = run_at
  end
  local first = (dk ~= '' and redis.call('GET', dk)) or (tk ~= '' and redis.call('GET', tk))
  local pending = bk ~= '' and redis.call('GET', bk)
  if first then
    reply[#reply + 1] = first
    reply[#reply + 1] = 1
  elseif pending and debounce(pending, ttype, payload, prio, at) then
    redis.call('PEXPIRE', bk, math.max(at - now_ms, 0) + DEBOUNCE_LINGER_MS)
    reply[#reply + 1] = pending
    reply[#reply + 1] = 2
  else
    local more = {'dk', dk, 'dw', dw}
    for j, field in ipairs(RETRY_FIELDS) do
      if ARGV[base + 7 + j] ~= '' then
        more[#more + 1] = field
        more[#more + 1] = ARGV[base + 7 + j]
      end
    end
    local id, now_ready = add_task(ttype, payload, prio, max, at, now_ms, '', g, more)
    if dk ~= '' then
      redis.call('SET', dk, id)
    end
    if tk ~= '' then
      redis.call('SET', tk, id, 'PX', tms)
    end
    if bk ~= '' then
      redis.call('SET', bk, id, 'PX', math.max(at - now_ms, 0) + DEBOUNCE_LINGER_MS)
    end
    if now_ready then
      ready = ready + 1
    else
      soonest = math.min(soonest or at, at)
    end
    reply[#reply + 1] = id
    reply[#reply + 1] = 0
  end
end
announce(ready)
if soonest then
  announce_due(soonest - now_ms)
end
return reply
