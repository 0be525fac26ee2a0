-- queue_settle.lua: act on a leased attempt: ack, nack, release, extend it or record progress.
-- KEYS: see queue_common.lua
-- ARGV[5] task id   ARGV[6] lease
-- ARGV[7] action: ack | nack | release | abandon | extend | progress
-- ARGV[8] ms: nack: retry delay (-1: backoff); extend, progress: new lease length (-1: keep)
-- ARGV[9], ARGV[10]: ack: result, its type; nack, abandon: error text; progress: value ('' none), JSON
-- ARGV[11] backoff base ms   ARGV[12] backoff cap ms (the server's defaults, see backoff_ms)
-- ARGV[13] a random number in [0, 1) for jitter   ARGV[14] nack: '0' when the error is not retryable
--   ack       the task succeeded, with its result (kept under the queue's retention)
--   nack      failed attempt: retry after the delay or the backoff, or dead when out of attempts
--   release   give it back ready now, the attempt not counted
--   abandon   give it back ready now, the attempt counted (its consumer went away)
--   extend    the lease ends ARGV[8] ms from now
--   progress  record how far the attempt got (and extend when ARGV[8] >= 0)
-- Returns {HELD.NOT_HELD} when the lease does not hold the task; else {HELD.HELD, state, at_ms} where
-- state is ready|delayed|dead|succeeded|leased and at_ms is when it is ready (or, for
-- extend and progress, when the lease now expires).
--! include status.lua
--! include common.lua
--! include queue_common.lua
local id, lease, action = ARGV[5], ARGV[6], ARGV[7]
local ms, text = tonumber(ARGV[8]), ARGV[9]
local now_ms = clock()
local ready = sweep(now_ms)
local k = task_key(id)
local state, held, att, max, prio = unpack(redis.call('HMGET', k, 'state', 'lease', 'att', 'max', 'prio'))
if state ~= 'leased' or held ~= lease then
  announce(ready)
  return {HELD.NOT_HELD}
end
local reply
if action == 'extend' or action == 'progress' then
  if action == 'progress' then
    redis.call('HSET', k, 'prog', text, 'pj', ARGV[10], 'pt', fmt(now_ms))
    event(now_ms, 'progress', id, 'a', att, 'pv', text, 'pj', ARGV[10])
  end
  if ms >= 0 then
    redis.call('ZADD', KEYS[4], fmt(now_ms + ms), id)
  end
  reply = {HELD.HELD, 'leased', tonumber(redis.call('ZSCORE', KEYS[4], id))}
else
  redis.call('ZREM', KEYS[4], id)
  att, max, prio = tonumber(att), tonumber(max), tonumber(prio)
  if action == 'ack' then
    redis.call('HSET', k, 'state', 'succeeded', 'res', text, 'rct', ARGV[10])
    event(now_ms, 'succeeded', id, 'a', att)
    retire(id, false, now_ms)
    reply = {HELD.HELD, 'succeeded', now_ms}
  elseif action == 'release' then
    redis.call('HSET', k, 'att', att - 1)
    redis.call('HDEL', k, 'lease')
    event(now_ms, 'released', id, 'a', att, 'r', fmt(now_ms))
    make_ready(id, now_ms, prio)
    ready = ready + 1
    reply = {HELD.HELD, 'ready', now_ms}
  else
    if text ~= '' then
      redis.call('HSET', k, 'err', text)
    end
    if att >= max or ARGV[14] == '0' then
      kill(id, redis.call('HGET', k, 'err') or '', ARGV[14] == '0' and 'not_retryable' or 'attempts', now_ms)
      reply = {HELD.HELD, 'dead', now_ms}
    else
      redis.call('HDEL', k, 'lease')
      local delay = 0
      if action == 'nack' then
        delay = ms
        if delay < 0 then
          delay = backoff_ms(id, att, tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13]))
        end
      end
      event(now_ms, 'failed', id, 'a', att, 'e', text, 'r', fmt(now_ms + delay))
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
