-- ratelimit_refund.lua: CheckMany all_or_none on a Redis Cluster: give back the hits a
-- slot's checks took when a later slot refused (keys in different slots cannot be
-- decided in one script). The count of the limit's algorithm goes back by the hits,
-- never past full; the sliding log drops its newest hits; a concurrency permit is released.
-- KEYS: eight per check (ratelimit_common.lua), checks in order.
-- ARGV: per check, six: hits taken, algorithm, rate, period ms, burst, the permit taken.
-- Returns the number of checks refunded.
--! include common.lua
--! include ratelimit_common.lua
local n = #KEYS / KEYS_PER_CHECK
local _, now_us = clock()
local now = now_us / 1000
local done = 0
for i = 1, n do
  local k = check_keys(i)
  local a = (i - 1) * 6
  local hits, algo = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local rate, period, burst = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  if hits > 0 then
    done = done + 1
    if algo == ALGO.CONCURRENCY then
      release_permit(k, ARGV[a + 6])
    elseif algo == ALGO.GCRA then
      local tat = tonumber(redis.call('GET', k.gcra) or 0)
      local back = tat - hits * period / rate
      if back > now then
        redis.call('SET', k.gcra, string.format('%.3f', back), 'PX', math.max(1, math.ceil(back - now)))
      else
        redis.call('DEL', k.gcra)
      end
    elseif algo == ALGO.TOKEN_BUCKET then
      local t = tonumber(redis.call('HGET', k.bucket, 't') or burst)  -- expired: full already
      if t < burst then
        redis.call('HSET', k.bucket, 't', string.format('%.6f', math.min(burst, t + hits)))
      end
    elseif algo == ALGO.SLIDING_LOG then
      local newest = redis.call('ZRANGE', k.log, -hits, -1)
      if #newest > 0 then
        redis.call('ZREM', k.log, unpack(newest))
      end
    else
      local key = (algo == ALGO.SLIDING_WINDOW) and k.window or k.fixed
      local c = tonumber(redis.call('HGET', key, 'c') or 0)
      if c > 0 then
        redis.call('HSET', key, 'c', math.max(0, c - hits))
      end
    end
  end
end
return done
