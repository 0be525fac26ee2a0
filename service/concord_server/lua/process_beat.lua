-- process_beat.lua: one server process says it is alive (process_registry.py): writes
-- its record with a TTL, notes the beat in the index, drops entries whose beat is
-- older than a record lives and keeps the index to its most recent entries; or, when
-- the process leaves, deletes both.
-- KEYS[1] index (zset: process id -> last beat ms, Redis clock)   KEYS[2] this process's record
-- ARGV[1] process id   ARGV[2] the record (JSON, stored as given)   ARGV[3] the record's TTL ms
-- ARGV[4] most entries the index keeps   ARGV[5] '1': the process leaves
-- Returns the Redis clock, ms.
--! include common.lua
local now_ms = clock()
if ARGV[5] == '1' then
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[1], ARGV[1])
  return now_ms
end
local ttl = tonumber(ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[1], now_ms, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms - ttl)
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[4])
if over > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
end
redis.call('PEXPIRE', KEYS[1], ttl)
return now_ms
