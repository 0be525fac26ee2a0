-- queue_settle.lua: act on leased attempts of one queue: ack, nack, release, extend them or record progress.
-- A batch of settles is one call, so a consumer settling many tasks pays one sweep and one script.
-- KEYS: see queue_common.lua
-- ARGV[7] backoff base ms   ARGV[8] backoff cap ms (the server's defaults, see backoff_ms)
-- ARGV[9] n, then n groups of 8 from ARGV[10]:
--   task id, lease,
--   action: ack | nack | release | abandon | extend | progress
--   ms: nack: retry delay (-1: backoff); extend, progress: new lease length (-1: keep)
--   text, text2: ack: result, its type; nack, abandon: error text; progress: value ('' none), JSON
--   a random number in [0, 1) for jitter,   nack: '0' when the error is not retryable
-- Actions:
--   ack       the task succeeded, with its result (kept under the queue's retention)
--   nack      failed attempt: retry after the delay or the backoff, or dead when out of attempts
--   release   give it back ready now, the attempt not counted
--   abandon   give it back ready now, the attempt counted (its consumer went away)
--   extend    the lease ends ms from now
--   progress  record how far the attempt got (and extend when ms >= 0)
-- Returns one reply per settle, in order: {HELD.NOT_HELD} when the lease does not hold the
-- task; else {HELD.HELD, state, at_ms} where state is ready|delayed|dead|succeeded|leased and
-- at_ms is when it is ready (or, for extend and progress, when the lease now expires).
--! include status.lua
--! include common.lua
--! include queue_common.lua
local BASE_MS, CAP_MS = tonumber(ARGV[7]), tonumber(ARGV[8])
local now_ms = clock()
local ready = sweep(now_ms)
local unleased = {}  -- taken out of the leased set together at the end: one call, not one a task

local function settle(id, lease, action, ms, text, text2, rand, retryable)
  local k = task_key(id)
  local state, held, att, max, prio, dk, dw, g = unpack(redis.call('HMGET', k, 'state', 'lease', 'att', 'max', 'prio',
    'dk', 'dw', 'grp'))
  if state ~= 'leased' or held ~= lease then
    return {HELD.NOT_HELD}
  end
  local reply
  if action == 'extend' or action == 'progress' then
    if action == 'progress' then
      redis.call('HSET', k, 'prog', text, 'pj', text2, 'pt', fmt(now_ms))
      event(now_ms, 'progress', id, 'a', att, 'pv', text, 'pj', text2)
    end
    if ms >= 0 then
      redis.call('ZADD', KEYS[4], fmt(now_ms + ms), id)
    end
    reply = {HELD.HELD, 'leased', tonumber(redis.call('ZSCORE', KEYS[4], id))}
  else
    unleased[#unleased + 1] = id
    ready = ready + lease_ended(g, now_ms)
    g = g or ''
    att, max, prio = tonumber(att), tonumber(max), tonumber(prio)
    if action == 'ack' then
      event(now_ms, 'succeeded', id, 'a', att)
      retire(id, false, now_ms, {'state', 'succeeded', 'res', text, 'rct', text2}, dk or '', dw)
      reply = {HELD.HELD, 'succeeded', now_ms}
    elseif action == 'release' then
      redis.call('HSET', k, 'att', att - 1)
      redis.call('HDEL', k, 'lease')
      event(now_ms, 'released', id, 'a', att, 'r', fmt(now_ms))
      make_ready(id, now_ms, prio, g)
      ready = ready + 1
      reply = {HELD.HELD, 'ready', now_ms}
    else
      if text ~= '' then
        redis.call('HSET', k, 'err', text)
      end
      if att >= max or retryable == '0' then
        kill(id, redis.call('HGET', k, 'err') or '', retryable == '0' and 'not_retryable' or 'attempts', now_ms)
        reply = {HELD.HELD, 'dead', now_ms}
      else
        redis.call('HDEL', k, 'lease')
        local delay = 0
        if action == 'nack' then
          delay = ms
          if delay < 0 then
            delay = backoff_ms(id, att, BASE_MS, CAP_MS, rand)
          end
        end
        event(now_ms, 'failed', id, 'a', att, 'e', text, 'r', fmt(now_ms + delay))
        if delay > 0 then
          redis.call('ZADD', KEYS[3], fmt(now_ms + delay), id)
          redis.call('HSET', k, 'state', 'delayed', 'ready', fmt(now_ms + delay))
          announce_due(delay)
          reply = {HELD.HELD, 'delayed', now_ms + delay}
        else
          make_ready(id, now_ms, prio, g)
          ready = ready + 1
          reply = {HELD.HELD, 'ready', now_ms}
        end
      end
    end
  end
  return reply
end

local replies = {}
for i = 0, tonumber(ARGV[9]) - 1 do
  local a = 10 + i * 8
  replies[i + 1] = settle(ARGV[a], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]), ARGV[a + 4], ARGV[a + 5],
                          tonumber(ARGV[a + 6]), ARGV[a + 7])
end
for_chunks(unleased, function(chunk) redis.call('ZREM', KEYS[4], unpack(chunk)) end)
announce(ready)
return replies
