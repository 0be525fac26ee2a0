-- ratelimit_common.lua: the six limiters, each one function that decides a check
-- on the Redis clock and returns the decision and how to record it.
--
-- KEYS of one check, in this order (keys.py RateLimitKeys; all share the key's tag):
--   limit (hash: a r p b d = algorithm, rate, period ms, burst, drain; no expiry),
--   gcra (string: the theoretical arrival time, ms), bucket (hash: t tokens, at ms),
--   log (zset: one member per hit, score = its ms), window (hash: w index, c this
--   period's count, p the last period's), fixed (hash: w index, c count), permits
--   (zset: concurrency permit -> expiry ms), held (hash: permit -> units, '*' -> total).
-- A check's keys also carry its permit id (k.permit: the concurrency limiter's, given by
-- the script's caller) when the script names one.
-- A limit L = {algo, rate, period (ms), burst, drain}. A decision d = {allowed,
-- remaining, reset_ms, retry_ms (-1: never at once), record = function or nil, permit =
-- the concurrency permit an allowed check holds, or nil}.
--! include common.lua

local ALGO = {GCRA = 1, TOKEN_BUCKET = 2, SLIDING_LOG = 3, SLIDING_WINDOW = 4, FIXED_WINDOW = 5, CONCURRENCY = 6}
local KEYS_PER_CHECK = 8

-- What this script has read or written of a key, so that the checks of one key in
-- one call (a hot key, many times in a CheckMany) read it from Redis once: the stored
-- limit by its limit key (false: none), GCRA's tat by its gcra key.
local seen = {}

local function ms_ceil(x)
  return math.max(1, math.ceil(x))
end

-- GCRA (redis-cell's): two quantities.
--   T, the emission interval: how long one unit takes to come back (period / rate).
--   tau, the delay tolerance: how far ahead of now the schedule may run, i.e. the
--   room for `burst` units at once (T * burst).
-- The key keeps one time, tat (theoretical arrival time): when the key would be full
-- again. A check of n units is allowed when tat + n*T - tau <= now.
local function gcra(k, now, hits, L)
  local T = L.period / L.rate
  local tau = T * L.burst
  local stored = seen[k.gcra]
  if stored == nil then
    stored = tonumber(redis.call('GET', k.gcra) or 0)
    seen[k.gcra] = stored
  end
  local tat = math.max(stored, now)
  local d = {}
  local after = tat
  if hits > L.burst then
    d.allowed, d.retry_ms = false, -1
  elseif tat + hits * T - tau <= now then
    d.allowed, d.retry_ms = true, 0
    after = tat + hits * T
  else
    d.allowed, d.retry_ms = false, tat + hits * T - tau - now
    if L.drain then after = now + tau end
  end
  d.remaining = math.max(0, math.floor((tau - (after - now)) / T + 1e-9))
  d.reset_ms = after - now
  if after ~= tat and hits > 0 then
    d.record = function()
      local kept = string.format('%.3f', after)
      redis.call('SET', k.gcra, kept, 'PX', ms_ceil(after - now))
      seen[k.gcra] = tonumber(kept)
    end
  end
  return d
end

-- Token bucket: `burst` tokens, refilled at rate per period; n units take n tokens.
local function token_bucket(k, now, hits, L)
  local per_ms = L.rate / L.period
  local got = redis.call('HMGET', k.bucket, 't', 'at')
  local tokens = L.burst
  if got[1] then
    tokens = math.min(L.burst, tonumber(got[1]) + (now - tonumber(got[2])) * per_ms)
  end
  local d = {}
  local left = tokens
  if hits > L.burst then
    d.allowed, d.retry_ms = false, -1
  elseif tokens >= hits then
    d.allowed, d.retry_ms = true, 0
    left = tokens - hits
  else
    d.allowed, d.retry_ms = false, (hits - tokens) / per_ms
    if L.drain then left = 0 end
  end
  d.remaining = math.floor(left + 1e-9)
  d.reset_ms = (L.burst - left) / per_ms
  if hits > 0 and left ~= tokens then
    d.record = function()
      redis.call('HSET', k.bucket, 't', string.format('%.6f', left), 'at', string.format('%.3f', now))
      redis.call('PEXPIRE', k.bucket, ms_ceil(d.reset_ms))
    end
  end
  return d
end

-- Sliding log: every hit's time for one period; at most rate in any period-long window.
local function sliding_log(k, now, hits, L)
  local since = now - L.period
  local count = redis.call('ZCOUNT', k.log, '(' .. string.format('%.3f', since), '+inf')
  local d = {}
  local used = count
  if hits > L.rate then
    d.allowed, d.retry_ms = false, -1
  elseif count + hits <= L.rate then
    d.allowed, d.retry_ms = true, 0
    used = count + hits
  else
    -- Room for hits once the (count + hits - rate) oldest hits in the window are a period old.
    local need = count + hits - L.rate
    local oldest = redis.call('ZRANGEBYSCORE', k.log, '(' .. string.format('%.3f', since), '+inf',
                              'WITHSCORES', 'LIMIT', need - 1, 1)
    d.allowed, d.retry_ms = false, tonumber(oldest[2]) + L.period - now
  end
  d.remaining = L.rate - used
  local newest = redis.call('ZRANGE', k.log, -1, -1, 'WITHSCORES')
  local last = (used > count) and now or (newest[2] and tonumber(newest[2]) or since)
  d.reset_ms = math.max(0, last + L.period - now)
  if used > count then
    d.record = function()
      redis.call('ZREMRANGEBYSCORE', k.log, '-inf', string.format('%.3f', since))
      -- Members are unique: the time in us and a count of this ms's hits so far.
      local us = math.floor(now * 1000)
      local here = redis.call('ZCOUNT', k.log, string.format('%.3f', now), string.format('%.3f', now))
      local args = {}
      for i = 1, hits do
        args[#args + 1] = string.format('%.3f', now)
        args[#args + 1] = fmt(us) .. ':' .. (here + i)
      end
      for_chunks(args, function(chunk) redis.call('ZADD', k.log, unpack(chunk)) end)
      redis.call('PEXPIRE', k.log, ms_ceil(L.period))
    end
  end
  return d
end

-- Sliding window: this period's count plus the last period's, weighted by the share
-- of it the window ending now still covers.
local function sliding_window(k, now, hits, L)
  local index = math.floor(now / L.period)
  local got = redis.call('HMGET', k.window, 'w', 'c', 'p')
  local c, p = 0, 0
  local w = tonumber(got[1])
  if w == index then
    c, p = tonumber(got[2]), tonumber(got[3])
  elseif w == index - 1 then
    p = tonumber(got[2])
  end
  local elapsed = now - index * L.period
  local weight = (L.period - elapsed) / L.period
  local estimate = p * weight + c
  local d = {}
  local taken = 0
  if hits > L.rate then
    d.allowed, d.retry_ms = false, -1
  elseif estimate + hits <= L.rate + 1e-9 then
    d.allowed, d.retry_ms = true, 0
    taken = hits
  else
    if c + hits <= L.rate and p > 0 then
      -- Later in this period, once the last period's share has shrunk enough.
      d.retry_ms = L.period * (1 - (L.rate - c - hits) / p) - elapsed
    else
      -- Next period: this one's count becomes the weighted one.
      local into = (c > 0) and L.period * (1 - (L.rate - hits) / c) or 0
      d.retry_ms = (L.period - elapsed) + math.max(0, into)
    end
    d.allowed = false
    if L.drain then taken = math.max(0, math.floor(L.rate - estimate)) end
  end
  local after = estimate + taken
  d.remaining = math.max(0, math.floor(L.rate - after + 1e-9))
  if c + taken > 0 then
    d.reset_ms = (index + 2) * L.period - now
  elseif p > 0 then
    d.reset_ms = L.period - elapsed
  else
    d.reset_ms = 0
  end
  if taken > 0 then
    d.record = function()
      redis.call('HSET', k.window, 'w', index, 'c', c + taken, 'p', p)
      redis.call('PEXPIRE', k.window, ms_ceil(2 * L.period))
    end
  end
  return d
end

-- A limit on a count (a window's, or the units held): `used` of `rate` taken, and the
-- decision for `hits` more with how many it takes; a refused one may try again in
-- retry() ms (asked only then).
local function counted(used, hits, L, retry)
  if hits > L.rate then
    return {allowed = false, retry_ms = -1}, 0
  elseif used + hits <= L.rate then
    return {allowed = true, retry_ms = 0}, hits
  end
  return {allowed = false, retry_ms = retry()}, 0
end

-- Fixed window: at most rate per period, periods starting at multiples of period.
local function fixed_window(k, now, hits, L)
  local index = math.floor(now / L.period)
  local got = redis.call('HMGET', k.fixed, 'w', 'c')
  local c = (tonumber(got[1]) == index) and tonumber(got[2]) or 0
  local ends = (index + 1) * L.period - now
  local d, taken = counted(c, hits, L, function() return ends end)
  if d.retry_ms > 0 and L.drain then
    taken = L.rate - c
  end
  d.remaining = L.rate - c - taken
  d.reset_ms = (c + taken > 0) and ends or 0
  if taken > 0 then
    d.record = function()
      redis.call('HSET', k.fixed, 'w', index, 'c', c + taken)
      redis.call('PEXPIRE', k.fixed, ms_ceil(ends))
    end
  end
  return d
end

-- Drops the concurrency permits past their expiry (their holders died or forgot);
-- returns the units still held.
local function held_now(k, now)
  local held = tonumber(redis.call('HGET', k.held, '*') or 0)
  local expired = redis.call('ZRANGEBYSCORE', k.permits, '-inf', string.format('%.3f', now), 'LIMIT', 0, 1000)
  if #expired > 0 then
    for _, units in ipairs(redis.call('HMGET', k.held, unpack(expired))) do
      held = held - tonumber(units or 0)
    end
    redis.call('ZREM', k.permits, unpack(expired))
    redis.call('HDEL', k.held, unpack(expired))
    redis.call('HSET', k.held, '*', math.max(held, 0))
  end
  return math.max(held, 0)
end

-- Concurrency: at most `rate` units held at once. An allowed check holds its hits as
-- one permit (k.permit) until Release gives them back or `period` passes (its holder
-- died or forgot). A refused one may try again when the earliest permit ends (sooner
-- if it is released: Release rings the key's waiters).
local function concurrency(k, now, hits, L)
  local held = held_now(k, now)
  local d, taken = counted(held, hits, L, function()
    local first = redis.call('ZRANGE', k.permits, 0, 0, 'WITHSCORES')
    return math.max(1, tonumber(first[2] or now) - now)
  end)
  d.remaining = L.rate - held - taken
  local last = redis.call('ZRANGE', k.permits, -1, -1, 'WITHSCORES')
  d.reset_ms = last[2] and math.max(0, tonumber(last[2]) - now) or 0
  if taken > 0 and k.permit then
    d.reset_ms = L.period
    d.permit = k.permit
    d.record = function()
      redis.call('ZADD', k.permits, string.format('%.3f', now + L.period), k.permit)
      redis.call('HSET', k.held, k.permit, hits, '*', held + hits)
      redis.call('PEXPIRE', k.permits, ms_ceil(L.period))
      redis.call('PEXPIRE', k.held, ms_ceil(L.period))
    end
  end
  return d
end

-- Gives a concurrency permit's units back; returns whether it was held.
local function release_permit(k, permit)
  if redis.call('ZREM', k.permits, permit) == 0 then
    return false
  end
  local units = tonumber(redis.call('HGET', k.held, permit) or 0)
  redis.call('HDEL', k.held, permit)
  redis.call('HINCRBY', k.held, '*', -units)
  return true
end

local LIMITERS = {gcra, token_bucket, sliding_log, sliding_window, fixed_window, concurrency}

-- The keys of the i-th check (1-based) among KEYS.
-- A check's eight keys, KEYS[b + 1] to KEYS[b + 8], by name.
local function keys_at(b)
  return {limit = KEYS[b + 1], gcra = KEYS[b + 2], bucket = KEYS[b + 3], log = KEYS[b + 4],
          window = KEYS[b + 5], fixed = KEYS[b + 6], permits = KEYS[b + 7], held = KEYS[b + 8]}
end

local function check_keys(i)
  return keys_at((i - 1) * KEYS_PER_CHECK)
end

-- By algorithm (ALGO's numbers), the names of its state keys, in KEYS order.
local STATE_KEYS = {{'gcra'}, {'bucket'}, {'log'}, {'window'}, {'fixed'}, {'permits', 'held'}}

-- A check that sent only its limit key and its algorithm's state keys, from KEYS[b + 1].
local function state_keys_at(b, algo)
  local k = {limit = KEYS[b + 1]}
  for j, name in ipairs(STATE_KEYS[algo]) do
    k[name] = KEYS[b + 1 + j]
  end
  return k
end

local function stored_limit(k)
  local L = seen[k.limit]
  if L == nil then
    local got = redis.call('HMGET', k.limit, 'a', 'r', 'p', 'b', 'd')
    L = got[1] and {algo = tonumber(got[1]), rate = tonumber(got[2]), period = tonumber(got[3]),
                    burst = tonumber(got[4]), drain = got[5] == '1'} or false
    seen[k.limit] = L
  end
  return L or nil
end

local function same_limit(a, b)
  return a.algo == b.algo and a.rate == b.rate and a.period == b.period and a.burst == b.burst
    and a.drain == b.drain
end

local function limit_reply(L)
  return {L.algo, L.rate, L.period, L.burst, L.drain and 1 or 0}
end
