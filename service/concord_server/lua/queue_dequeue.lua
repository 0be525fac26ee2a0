-- queue_dequeue.lua: lease up to N ready tasks, taking turns between lanes (flow control
-- in queue_common.lua): within a lane highest order first; the lowest pass first across.
-- KEYS: see queue_common.lua
-- ARGV[7] most tasks   ARGV[8] lease ms   ARGV[9] lease token prefix (random, per call)
-- ARGV[10] reply bytes: leases no more tasks than fit (task_bytes each; a reply that could
--         not be sent would strand them leased to nobody)   ARGV[11] 1: take the first
--         task even if it alone is over (nothing else is leased for this reply yet)
-- Returns {now_ms, ms until the clock changes the queue (-1: never), ready tasks left,
--          task 1 (see task_reply), task 2, ...}; while paused, no task and 0 left.
-- The queue's cap and rate bound how many are leased; a lease counts against its
-- group's cap (n) and rate (t), and a group that reaches either stops taking turns.
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
local became_ready = sweep(now_ms)
if paused() then
  return {now_ms, next_change(now_ms), 0}
end
local lease_ms = tonumber(ARGV[8])
local want = tonumber(ARGV[7])
local change = next_change(now_ms)
local function sooner(ms)
  if change < 0 or ms < change then
    change = ms
  end
end

-- The queue's own rules first: they bound the whole batch.
local q = queue_rules()
local held_by = ''
if q.cap >= 0 then
  local room = math.max(0, q.cap - redis.call('ZCARD', KEYS[4]))
  if room < want then
    want = room
    held_by = room == 0 and 'queue_capped' or ''
  end
end
if q.rate and want > 0 then
  local fit, _, wait = gcra_fit(q.t, now_ms, q.rate, want)
  if fit < want then
    want = fit
    sooner(wait)
    held_by = fit == 0 and 'queue_limited' or held_by
  end
end

-- Take turns: the lane with the lowest pass takes a run of tasks, as many as bring its
-- pass up to the next lane's (all it may, when it is alone), within its rules.
local budget, taken, first = tonumber(ARGV[10]), 0, ARGV[11] == '1'
local picked = {}  -- {id, group}
local served = nil
while #picked < want do
  local head = redis.call('ZRANGE', KEYS[13], 0, 1, 'WITHSCORES')
  if not head[1] then
    break
  end
  local g, pass = head[1], tonumber(head[2])
  local r = rules(g)
  local why = lane_rule(g, now_ms)
  if why ~= '' then
    park_lane(g, pass, why, now_ms)
  else
    local run = want - #picked
    if head[3] then  -- up to the next lane's pass (ties go to the next turn, by name)
      run = math.min(run, math.max(1, math.ceil((tonumber(head[4]) - pass) * r.weight - 1e-9)))
    end
    if r.cap >= 0 then
      run = math.min(run, r.cap - r.n)
    end
    if r.rate then
      run = gcra_fit(r.t, now_ms, r.rate, run)
    end
    local ids = redis.call('ZRANGE', lane_key(g), 0, run - 1)
    local fits = #ids
    for i, id in ipairs(ids) do
      taken = taken + task_bytes(id)
      if taken > budget and not (first and #picked == 0 and i == 1) then
        fits = i - 1
        break
      end
    end
    if #ids == 0 then
      park_lane(g, pass, '', now_ms)  -- a hint gone stale: the lane has nothing ready
    elseif fits == 0 then
      break  -- the reply is full
    else
      ids = {unpack(ids, 1, fits)}
      for_chunks(ids, function(chunk) redis.call('ZREM', lane_key(g), unpack(chunk)) end)
      for _, id in ipairs(ids) do
        picked[#picked + 1] = {id, g}
      end
      served = pass
      pass = pass + #ids / r.weight
      if g ~= '' then
        r.n = r.n + #ids
        local fields = {'n', r.n}
        if r.rate then
          local _, after = gcra_fit(r.t, now_ms, r.rate, #ids)
          r.t = string.format('%.3f', after)
          fields[3], fields[4] = 't', r.t
        end
        redis.call('HSET', GROUP .. g, unpack(fields))
      end
      if redis.call('ZCARD', lane_key(g)) == 0 then
        park_lane(g, pass, '', now_ms)
        if g ~= '' then
          prune_group(g, now_ms)
        end
      else
        why = lane_rule(g, now_ms)
        if why ~= '' then
          park_lane(g, pass, why, now_ms)
        else
          redis.call('ZADD', KEYS[13], pass_fmt(pass), g)
        end
      end
    end
  end
end
if served then
  redis.call('HSET', KEYS[16], 'vt', pass_fmt(served))
end
if q.rate and #picked > 0 then
  local _, after = gcra_fit(q.t, now_ms, q.rate, #picked)
  redis.call('HSET', KEYS[16], 'qt', string.format('%.3f', after))
end
-- A queue-wide rule that holds tasks back is told once (WatchQueue), until it lets go.
if #picked == 0 and held_by ~= '' and redis.call('ZCARD', KEYS[2]) > 0 then
  if redis.call('HGET', KEYS[16], 'qh') ~= held_by then
    redis.call('HSET', KEYS[16], 'qh', held_by)
    event(now_ms, 'held', '', 'g', '', 'h', held_by)
  end
elseif #picked > 0 and (q.cap >= 0 or q.rate) then  -- only queue-wide rules set qh
  redis.call('HDEL', KEYS[16], 'qh')
end

local tasks = {}
if #picked > 0 then
  local ids = {}
  for i, p in ipairs(picked) do
    ids[i] = p[1]
  end
  -- What every task shares is one call for the whole batch.
  for_chunks(ids, function(chunk) redis.call('ZREM', KEYS[2], unpack(chunk)) end)
  local expires = fmt(now_ms + lease_ms)
  for_chunks(ids, function(chunk)
    local args = {}
    for _, id in ipairs(chunk) do
      args[#args + 1] = expires
      args[#args + 1] = id
    end
    redis.call('ZADD', KEYS[4], unpack(args))
  end)
  for i, id in ipairs(ids) do
    local f = redis.call('HMGET', task_key(id), unpack(REPLY_FIELDS))
    local att = tonumber(f[5]) + 1
    local lease = ARGV[9] .. '.' .. i
    redis.call('HSET', task_key(id), 'state', 'leased', 'lease', lease, 'lat', fmt(now_ms), 'att', att)
    event(now_ms, 'leased', id, 'a', att)
    f[4], f[5], f[7] = 'leased', tostring(att), lease
    tasks[#tasks + 1] = reply_of(id, f, expires)
  end
  sooner(lease_ms)
end
local left = redis.call('ZCARD', KEYS[2])
-- Tasks the clock made ready here may have other waiters; so may ones we left.
if became_ready > 0 then
  announce(left)
end
local reply = {now_ms, change, left}
for _, t in ipairs(tasks) do
  reply[#reply + 1] = t
end
return reply
