-- waits_for.lua: the wait-for registry behind deadlock detection (primitives/deadlocks.py).
-- KEYS[1] hash: owner -> "until_ms\nsince_ms\nlease\nlock name\nlock name..." (one wait per owner)
-- ARGV[1] 'begin' or 'end'   ARGV[2] owner   ARGV[3] lease
-- ARGV[4] (begin) the entry, which starts "until_ms\nsince_ms\nlease\n"
-- Returns 1. 'end' removes the owner's entry only if it is still this lease's, so a
-- newer wait under the same owner keeps its own. The hash lives as long as its
-- longest wait (until_ms is the Redis clock).
if ARGV[1] == 'begin' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
  local until_ms = tonumber(string.match(ARGV[4], '^(%d+)'))
  local t = redis.call('TIME')
  local left = until_ms - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  if left > 0 and redis.call('PTTL', KEYS[1]) < left then
    redis.call('PEXPIRE', KEYS[1], left)
  end
  return 1
end
local entry = redis.call('HGET', KEYS[1], ARGV[2])
if entry and select(3, string.find(entry, '^%d+\n%d+\n([^\n]*)')) == ARGV[3] then
  redis.call('HDEL', KEYS[1], ARGV[2])
end
return 1
