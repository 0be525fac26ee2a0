-- ratelimit_check.lua: Check and CheckMany: decide every check on the Redis clock,
-- then record what was taken. With all_or_none nothing is recorded unless every
-- check is allowed (a drain still records on the key that refused).
-- KEYS: eight per check (ratelimit_common.lua), checks in order.
-- ARGV[1] all_or_none (1 or 0); ARGV[2] the time in us to decide at, '' for the Redis
--   clock (only tests give one: primitives/ratelimit.py); then per check, seven:
--   hits, has_limit (1: the limit follows; 0: the stored one), algorithm, rate,
--   period ms, burst, drain (1/0); last, the call's permit prefix (random; check i's
--   concurrency permit is "<prefix>.<i>").
-- Returns {overall, then seven items per check}: overall RATE.ALLOWED when every check
-- is, else RATE.REFUSED. A check's seven: RATE.ALLOWED or RATE.REFUSED, remaining,
-- rate, burst, reset ms, retry ms (-1: the hits exceed what ever passes at once), the
-- concurrency permit it holds ('' none); or LIMIT.MISMATCH and the stored limit
-- (algorithm, rate, period ms, burst, drain) and ''; or LIMIT.UNSET, five zeros and ''.
-- A mismatch or an unset limit changes nothing.
--! include common.lua
--! include status.lua
--! include ratelimit_common.lua
local all_or_none = ARGV[1] == '1'
local n = #KEYS / KEYS_PER_CHECK
local permit_prefix = ARGV[3 + n * 7]
local _, now_us = clock()
if ARGV[2] ~= '' then
  now_us = tonumber(ARGV[2])
end
local now = now_us / 1000
local replies, decisions = {}, {}
local every = true
for i = 1, n do
  local a = 2 + (i - 1) * 7
  local k = check_keys(i)
  k.permit = permit_prefix .. '.' .. i
  local hits = tonumber(ARGV[a + 1])
  local L = stored_limit(k)
  if ARGV[a + 2] == '1' then
    local asked = {algo = tonumber(ARGV[a + 3]), rate = tonumber(ARGV[a + 4]), period = tonumber(ARGV[a + 5]),
                   burst = tonumber(ARGV[a + 6]), drain = ARGV[a + 7] == '1'}
    if L and not same_limit(L, asked) then
      replies[i] = {LIMIT.MISMATCH, unpack(limit_reply(L))}
      replies[i][7] = ''
      every = false
      L = nil
    else
      L = asked
    end
  elseif not L then
    replies[i] = {LIMIT.UNSET, 0, 0, 0, 0, 0, ''}
  end
  if L then
    local d = LIMITERS[L.algo](k, now, hits, L)
    decisions[i] = d
    replies[i] = {d.allowed and RATE.ALLOWED or RATE.REFUSED, d.remaining, L.rate, L.burst,
                  math.ceil(d.reset_ms), d.retry_ms < 0 and -1 or math.ceil(d.retry_ms), d.permit or ''}
  end
  every = every and decisions[i] ~= nil and decisions[i].allowed
end
for i = 1, n do
  local d = decisions[i]
  if d and d.record and (every or not all_or_none or not d.allowed) then
    d.record()
  end
end
if all_or_none and not every then
  -- Nothing was taken: report each allowed check's room as before this call.
  for i = 1, n do
    local d = decisions[i]
    if d and d.allowed and replies[i][1] == RATE.ALLOWED then
      replies[i][2] = replies[i][2] + tonumber(ARGV[3 + (i - 1) * 7])
      replies[i][7] = ''
    end
  end
end
local out = {every and RATE.ALLOWED or RATE.REFUSED}
for i = 1, n do
  for _, v in ipairs(replies[i]) do
    out[#out + 1] = v
  end
end
return out
