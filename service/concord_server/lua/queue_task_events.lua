-- queue_task_events.lua: one task's events from the queue's event stream (WatchQueue's),
-- for the web console's task page. Writes nothing (no sweep). Bounded: looks at no more
-- than ARGV[9] events (at most 1000), newest first, from before event ARGV[8] (0: from
-- the newest), and keeps at most ARGV[10] of the task's (at most 200); it stops at the
-- task's `enqueued` event, its first (task ids are never handed out twice).
-- KEYS: see queue_common.lua
-- ARGV[7] task id   ARGV[8] look at events numbered below this (0: from the newest)
-- ARGV[9] most events looked at (0: none, just the clock and the numbers)
-- ARGV[10] most of the task's events returned
-- Returns {now_ms, the last event's n (0: none ever), the oldest kept n (0: none kept),
--   events looked at, where to go on (the n to look below next; 0: nothing older to
--   look at), 1 if the task's `enqueued` event was found (its history is whole),
--   then the task's events, newest first, each {n, kind, task id, ms, field, value, ...}}
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
local last = tonumber(redis.call('GET', KEYS[12]) or 0)
local head = redis.call('XRANGE', KEYS[11], '-', '+', 'COUNT', 1)
local first = 0
if head[1] then
  first = tonumber(string.match(head[1][1], '^(%d+)'))
end
local id = ARGV[7]
local budget = math.min(math.max(tonumber(ARGV[9]) or 0, 0), 1000)
local most = math.min(math.max(tonumber(ARGV[10]) or 0, 1), 200)
local before = tonumber(ARGV[8]) or 0
local top = '+'
if before > 0 then
  top = '(' .. fmt(before) .. '-0'
end
local found, looked, whole, go_on = {}, 0, 0, 0
local CHUNK = 200
while budget > 0 and first > 0 do
  local entries = redis.call('XREVRANGE', KEYS[11], top, '-', 'COUNT', math.min(CHUNK, budget - looked))
  for _, e in ipairs(entries) do
    local n = tonumber(string.match(e[1], '^(%d+)'))
    local f = e[2]
    looked = looked + 1
    go_on = n
    -- f: k kind id task t ms, then the kind's own fields
    if f[4] == id then
      local one = {n, f[2], f[4], f[6]}
      for i = 7, #f do
        one[#one + 1] = f[i]
      end
      found[#found + 1] = one
      if f[2] == 'enqueued' then
        whole = 1
        break
      end
      if #found >= most then
        break
      end
    end
  end
  if whole == 1 or #found >= most or looked >= budget then
    break
  end
  if #entries < math.min(CHUNK, budget - looked + #entries) or #entries == 0 then
    go_on = 0  -- the oldest kept event was looked at
    break
  end
  top = '(' .. fmt(go_on) .. '-0'
end
if whole == 1 or go_on == first then
  go_on = 0
end
local reply = {now_ms, last, first, looked, go_on, whole}
for _, one in ipairs(found) do
  reply[#reply + 1] = one
end
return reply
