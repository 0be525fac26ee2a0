-- ratelimit_check.lua: Check and CheckMany: decide every check on the Redis clock,
-- then record what was taken. With all_or_none nothing is recorded unless every
-- check is allowed (a drain still records on the key that refused).
-- KEYS: per check, in order, either all eight (ratelimit_common.lua: the check names no
--   limit, so its stored one decides the algorithm) or the stored limit's key and the
--   state keys of the algorithm of the limit it carries (one; two for CONCURRENCY:
--   permits, held), since a carried limit either agrees with the stored one or is
--   refused before any state is touched.
-- ARGV[1] all_or_none (1 or 0); ARGV[2] the time in us to decide at, '' for the Redis
--   clock (only tests give one: primitives/ratelimit.py); ARGV[3] the call's permit
--   prefix (random; check i's concurrency permit is "<prefix>.<i>"); ARGV[4] m, the
--   number of limits the checks carry, then m limits of five: algorithm, rate,
--   period ms, burst, drain (1/0) (most checks of a call share one, sent once); then
--   per check, three: hits, which of the m limits it carries (1-based; 0: the key's
--   stored one), and how many KEYS are its own (8, or 1 + its algorithm's state keys).
-- Returns {overall, then seven items per check}: overall RATE.ALLOWED when every check
-- is, else RATE.REFUSED. A check's seven: RATE.ALLOWED or RATE.REFUSED, remaining,
-- rate, burst, reset ms, retry ms (-1: the hits exceed what ever passes at once), the
-- concurrency permit it holds ('' none); or LIMIT.MISMATCH and the stored limit
-- (algorithm, rate, period ms, burst, drain) and ''; or LIMIT.UNSET, five zeros and ''.
-- A mismatch or an unset limit changes nothing, for any check of the call: the server
-- refuses the whole call (the other checks' seven are then RATE.REFUSED and zeros).
--! include common.lua
--! include status.lua
--! include ratelimit_common.lua
local all_or_none = ARGV[1] == '1'
local permit_prefix = ARGV[3]
local carried = {}
for j = 1, tonumber(ARGV[4]) do
  local a = 4 + (j - 1) * 5
  carried[j] = {algo = tonumber(ARGV[a + 1]), rate = tonumber(ARGV[a + 2]), period = tonumber(ARGV[a + 3]),
                burst = tonumber(ARGV[a + 4]), drain = ARGV[a + 5] == '1'}
end
local checks_at = 4 + #carried * 5  -- ARGV index before the first check's three
local n = (#ARGV - checks_at) / 3
local ks, at = {}, 0  -- each check's keys, by name
for i = 1, n do
  local a = checks_at + (i - 1) * 3
  local count = tonumber(ARGV[a + 3])
  local asked = carried[tonumber(ARGV[a + 2])]
  ks[i] = count == KEYS_PER_CHECK and keys_at(at) or state_keys_at(at, asked.algo)
  at = at + count
end
local _, now_us = clock()
if ARGV[2] ~= '' then
  now_us = tonumber(ARGV[2])
end
local now = now_us / 1000
-- The reply, written in place: check i's seven items start at out[2 + (i - 1) * 7].
local out = {RATE.ALLOWED}
local function put(i, status, remaining, rate, burst, reset_ms, retry_ms, permit)
  local o = 1 + (i - 1) * 7
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = status, remaining, rate, burst
  out[o + 5], out[o + 6], out[o + 7] = reset_ms, retry_ms, permit
end
local refused = false  -- a check's limit disagrees or is missing: the call takes nothing
local function mismatch(i, L)
  put(i, LIMIT.MISMATCH, L.algo, L.rate, L.period, L.burst, L.drain and 1 or 0, '')
  refused = true
end
local decisions = {}
local every = true
-- Checks of one key in one call: each is decided after the ones before it have taken
-- their hits, or (all_or_none, where nothing is taken until every check is decided)
-- together, as one check of their summed hits that all of them share.
local first_of, total = {}, {}
for i = 1, n do
  local a = checks_at + (i - 1) * 3
  local k = ks[i]
  local hits = tonumber(ARGV[a + 1])
  local asked = carried[tonumber(ARGV[a + 2])]
  local L = stored_limit(k)
  if asked then
    if L and not same_limit(L, asked) then
      mismatch(i, L)
      L = nil
    else
      L = asked
    end
  elseif not L then
    put(i, LIMIT.UNSET, 0, 0, 0, 0, 0, '')
    refused = true
  end
  local first = first_of[k.limit]
  if L and first and not same_limit(decisions[first].L, L) then
    -- One key, two limits in one call: the first one's stands.
    mismatch(i, decisions[first].L)
  elseif L and all_or_none and first then
    decisions[i] = {shared = first, L = L}
    total[first] = total[first] + hits
  elseif L then
    first_of[k.limit] = first_of[k.limit] or i
    total[i] = hits
    if L.algo == ALGO.CONCURRENCY then
      k.permit = permit_prefix .. '.' .. i
    end
    decisions[i] = {k = k, L = L}
  end
end
if refused then
  for i = 1, n do
    if out[2 + (i - 1) * 7] == nil then
      put(i, RATE.REFUSED, 0, 0, 0, 0, 0, '')
    end
  end
  out[1] = RATE.REFUSED
  return out
end
for i = 1, n do
  local d = decisions[i]
  if d and not d.shared then
    local L = d.L
    local decided = LIMITERS[L.algo](d.k, now, total[i], L)
    decided.L = L
    decisions[i] = decided
    if decided.record and not all_or_none then
      decided.record()  -- a later check of this key sees these hits taken
      decided.record = nil
    end
  end
end
for i = 1, n do
  local d = decisions[i]
  if d and d.shared then
    decisions[i] = decisions[d.shared]
    d = decisions[i]
  end
  if d then
    put(i, d.allowed and RATE.ALLOWED or RATE.REFUSED, d.remaining, d.L.rate, d.L.burst, math.ceil(d.reset_ms),
        d.retry_ms < 0 and -1 or math.ceil(d.retry_ms), d.permit or '')
  end
  every = every and d ~= nil and d.allowed
end
local recorded = {}
for i = 1, n do
  local d = decisions[i]
  if d and d.record and not recorded[d] and (every or not d.allowed) then
    d.record()
    recorded[d] = true
  end
end
if all_or_none and not every then
  -- Nothing was taken: report each allowed check's room as before this call.
  for i = 1, n do
    local d, o = decisions[i], 1 + (i - 1) * 7
    if d and d.allowed and out[o + 1] == RATE.ALLOWED then
      out[o + 2] = out[o + 2] + total[first_of[ks[i].limit]]
      out[o + 7] = ''
    end
  end
end
out[1] = every and RATE.ALLOWED or RATE.REFUSED
return out
