-- ratelimit_wait.lua: Wait: one waiter's turn at a key, FIFO among waiters. The head
-- of the key's queue takes its hits as soon as its limit allows (and rings the waiters
-- left, by the key's channel: the next one is now the head); anyone else joins the back
-- of the queue and waits to be told. Waiters whose wait ended are dropped by whoever
-- runs next, so a waiter that vanished holds nobody up past its deadline.
-- KEYS: the eight of one check (ratelimit_common.lua), then queue (zset: token ->
--   arrival us) and waiters (hash: token -> deadline ms).
-- ARGV[1] token (also the concurrency permit this waiter would hold), ARGV[2] the time
--   in us to decide at ('' for the Redis clock, as in ratelimit_check.lua), ARGV[3] ms
--   this waiter may still wait (0: withdraw: leave the queue), ARGV[4] channel, then
--   hits, has_limit, algorithm, rate, period ms, burst, drain.
-- Returns seven items: RATE.ALLOWED and the decision (remaining, rate, burst, reset ms,
-- 0, the concurrency permit or ''), or RATE.REFUSED and the decision with retry ms: -1
-- the hits never pass at once, -2 queued behind another waiter (told when it is this
-- one's turn), else when this one (the head) may try again, and ''; or LIMIT.MISMATCH /
-- LIMIT.UNSET as ratelimit_check.
--! include common.lua
--! include status.lua
--! include ratelimit_common.lua
local token, wait_ms, channel = ARGV[1], tonumber(ARGV[3]), ARGV[4]
local qkey, wkey = KEYS[9], KEYS[10]
local _, now_us = clock()
if ARGV[2] ~= '' then
  now_us = tonumber(ARGV[2])
end
local now = now_us / 1000
local deadline = now + wait_ms

-- Rings the waiters left (their count: each server wakes up to that many of its own,
-- so the new head is among them wherever it waits).
local function tell_next()
  local left = redis.call('ZCARD', qkey)
  if left > 0 then
    redis.call('SPUBLISH', channel, left)
  end
end

local function leave()
  local head = redis.call('ZRANGE', qkey, 0, 0)[1]
  redis.call('ZREM', qkey, token)
  redis.call('HDEL', wkey, token)
  if head == token then
    tell_next()
  end
end

-- Drop waiters whose wait is over (their calls have answered or gone).
local gone = {}
local ends = redis.call('HGETALL', wkey)
for i = 1, #ends, 2 do
  if tonumber(ends[i + 1]) < now and ends[i] ~= token then
    gone[#gone + 1] = ends[i]
  end
end
if #gone > 0 then
  redis.call('ZREM', qkey, unpack(gone))
  redis.call('HDEL', wkey, unpack(gone))
end

if wait_ms == 0 then
  leave()
  return {RATE.REFUSED, 0, 0, 0, 0, 0, ''}
end

local k = check_keys(1)
k.permit = token
local hits = tonumber(ARGV[5])
local L = stored_limit(k)
if ARGV[6] == '1' then
  local asked = {algo = tonumber(ARGV[7]), rate = tonumber(ARGV[8]), period = tonumber(ARGV[9]),
                 burst = tonumber(ARGV[10]), drain = ARGV[11] == '1'}
  if L and not same_limit(L, asked) then
    return {LIMIT.MISMATCH, L.algo, L.rate, L.period, L.burst, L.drain and 1 or 0, ''}
  end
  L = asked
elseif not L then
  return {LIMIT.UNSET, 0, 0, 0, 0, 0, ''}
end

local head = redis.call('ZRANGE', qkey, 0, 0)[1]
local d = LIMITERS[L.algo](k, now, hits, L)
if (head == nil or head == token) and d.allowed then
  if d.record then
    d.record()
  end
  leave()
  return {RATE.ALLOWED, d.remaining, L.rate, L.burst, math.ceil(d.reset_ms), 0, d.permit or ''}
end
if d.retry_ms < 0 then
  leave()
  return {RATE.REFUSED, d.remaining, L.rate, L.burst, math.ceil(d.reset_ms), -1, ''}
end
redis.call('ZADD', qkey, 'NX', now_us, token)
redis.call('HSET', wkey, token, deadline)
local last = math.max(deadline - now, 1)
for _, key in ipairs({qkey, wkey}) do
  if redis.call('PTTL', key) < last then
    redis.call('PEXPIRE', key, math.ceil(last))
  end
end
local retry = -2
if redis.call('ZRANGE', qkey, 0, 0)[1] == token then
  retry = math.ceil(d.retry_ms)
end
return {RATE.REFUSED, d.remaining, L.rate, L.burst, math.ceil(d.reset_ms), retry, ''}
