-- process_list.lua: the live server processes' records (process_registry.py), most
-- recent beat first.
-- KEYS[1] index (zset: process id -> last beat ms)
-- ARGV[1] the records' key prefix (+ process id; same hash tag)   ARGV[2] a record's TTL ms
-- ARGV[3] most records returned
-- Returns {now_ms, process id, its last beat ms, its record, ...}: records that expired
-- (a process that stopped beating) are left out.
--! include common.lua
local now_ms = clock()
local ids = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', now_ms - tonumber(ARGV[2]), 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[3]))
local reply = {now_ms}
for i = 1, #ids, 2 do
  local record = redis.call('GET', ARGV[1] .. ids[i])
  if record then
    reply[#reply + 1] = ids[i]
    reply[#reply + 1] = tonumber(ids[i + 1])
    reply[#reply + 1] = record
  end
end
return reply
