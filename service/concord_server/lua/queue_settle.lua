-- queue_settle.lua: end a leased attempt: ack, nack, release or extend it.
-- KEYS: see queue_common.lua
-- ARGV[4] task id   ARGV[5] lease   ARGV[6] action: ack | nack | release | abandon | extend
-- ARGV[7] ms: nack: retry delay (-1: backoff); extend: new lease length
-- ARGV[8] error text (nack, abandon)   ARGV[9] backoff base ms   ARGV[10] backoff cap ms
--   ack      finish the task
--   nack     failed attempt: retry after the delay or the backoff, or dead when out of attempts
--   release  give it back ready now, the attempt not counted
--   abandon  give it back ready now, the attempt counted (its consumer went away)
--   extend   the lease ends ARGV[7] ms from now
-- Returns {HELD.NOT_HELD} when the lease does not hold the task; else {HELD.HELD, state, at_ms} where
-- state is ready|delayed|dead|done|leased and at_ms is when it is ready (or, for
-- extend, when the lease now expires).
--! include status.lua
--! include common.lua
--! include queue_common.lua
local id, lease, action = ARGV[4], ARGV[5], ARGV[6]
local now_ms = clock()
local ready = sweep(now_ms)
local k = task_key(id)
local state, held, att, max, prio = unpack(redis.call('HMGET', k, 'state', 'lease', 'att', 'max', 'prio'))
if state ~= 'leased' or held ~= lease then
  announce(ready)
  return {HELD.NOT_HELD}
end
local reply
if action == 'extend' then
  local until_ms = now_ms + tonumber(ARGV[7])
  redis.call('ZADD', KEYS[4], until_ms, id)
  reply = {HELD.HELD, 'leased', until_ms}
else
  redis.call('ZREM', KEYS[4], id)
  att, max, prio = tonumber(att), tonumber(max), tonumber(prio)
  if action == 'ack' then
    finish(id)
    reply = {HELD.HELD, 'done', now_ms}
  elseif action == 'release' then
    redis.call('HSET', k, 'att', att - 1)
    redis.call('HDEL', k, 'lease')
    make_ready(id, now_ms, prio)
    ready = ready + 1
    reply = {HELD.HELD, 'ready', now_ms}
  else
    if ARGV[8] ~= '' then
      redis.call('HSET', k, 'err', ARGV[8])
    end
    if att >= max then
      kill(id, ARGV[8], now_ms)
      reply = {HELD.HELD, 'dead', now_ms}
    else
      redis.call('HDEL', k, 'lease')
      local delay = 0
      if action == 'nack' then
        delay = tonumber(ARGV[7])
        if delay < 0 then
          delay = math.min(tonumber(ARGV[10]), tonumber(ARGV[9]) * 2 ^ (att - 1))
        end
      end
      if delay > 0 then
        redis.call('ZADD', KEYS[3], fmt(now_ms + delay), id)
        redis.call('HSET', k, 'state', 'delayed', 'ready', fmt(now_ms + delay))
        announce_due(delay)
        reply = {HELD.HELD, 'delayed', now_ms + delay}
      else
        make_ready(id, now_ms, prio)
        ready = ready + 1
        reply = {HELD.HELD, 'ready', now_ms}
      end
    end
  end
end
announce(ready)
return reply
