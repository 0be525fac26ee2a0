-- queue_events.lua: read the queue's task events (changes nothing), for WatchQueue.
-- KEYS: see queue_common.lua
-- ARGV[7] the events after this n; ARGV[8] at most this many (0: none, just the numbers)
-- Returns {the last event's n (0: none ever), the oldest kept event's n (0: none kept),
--   then per event {n, kind, task id, ms, field, value, ...} (see event in queue_common.lua)}
--! include common.lua
--! include queue_common.lua
local last = tonumber(redis.call('GET', KEYS[12]) or 0)
local head = redis.call('XRANGE', KEYS[11], '-', '+', 'COUNT', 1)
local first = 0
if head[1] then
  first = tonumber(string.match(head[1][1], '^(%d+)'))
end
local reply = {last, first}
if tonumber(ARGV[8]) > 0 then
  for _, e in ipairs(redis.call('XRANGE', KEYS[11], '(' .. ARGV[7] .. '-0', '+', 'COUNT', ARGV[8])) do
    local one = {string.match(e[1], '^(%d+)')}
    local f = e[2]
    -- f: k kind id task t ms, then the kind's own fields
    one[2], one[3], one[4] = f[2], f[4], f[6]
    for i = 7, #f do
      one[#one + 1] = f[i]
    end
    reply[#reply + 1] = one
  end
end
return reply
