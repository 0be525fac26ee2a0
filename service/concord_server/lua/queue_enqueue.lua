-- queue_enqueue.lua: add a batch of tasks, all in one atomic step.
-- KEYS: see queue_common.lua
-- ARGV[5] number of tasks, then 12 values per task:
--   type, payload, priority, delay ms (-1: none), run-at ms (-1: none),
--   dedupe key (full key name; '' for none), dedupe window ms, max attempts (0: the queue's),
--   backoff kind (fixed | exp), initial ms, cap ms, jitter (1 | 0): each '' when the queue's applies
-- Returns {task id 1, duplicate 1 (0/1), task id 2, duplicate 2, ...}
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
local ready = sweep(now_ms)
local reply = {}
local soonest = nil
local n = tonumber(ARGV[5])
local queue_max = tonumber(redis.call('HGET', KEYS[9], 'ma') or DEFAULT_MAX_ATTEMPTS)
for i = 0, n - 1 do
  local base = 6 + i * 12
  local ttype, payload, prio = ARGV[base], ARGV[base + 1], tonumber(ARGV[base + 2])
  local delay, run_at = tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  local dk, dw, max = ARGV[base + 5], ARGV[base + 6], tonumber(ARGV[base + 7])
  if max == 0 then
    max = queue_max
  end
  local first = dk ~= '' and redis.call('GET', dk)
  if first then
    reply[#reply + 1] = first
    reply[#reply + 1] = 1
  else
    local at = now_ms
    if delay >= 0 then
      at = now_ms + delay
    elseif run_at >= 0 then
      at = run_at
    end
    local more = {'dk', dk, 'dw', dw}
    for j, field in ipairs(RETRY_FIELDS) do
      if ARGV[base + 7 + j] ~= '' then
        more[#more + 1] = field
        more[#more + 1] = ARGV[base + 7 + j]
      end
    end
    local id, now_ready = add_task(ttype, payload, prio, max, at, now_ms, '', more)
    if dk ~= '' then
      redis.call('SET', dk, id)
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
