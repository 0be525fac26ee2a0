-- names_best.lua: the best-scored names in a prefix range, at bounded cost.
-- KEYS: see names_common.lua
-- ARGV[1], ARGV[2] the range as ZRANGEBYLEX bounds   ARGV[3] the member prefix ('' = all)
-- ARGV[4] limit   ARGV[5] range scan: most names read from the range
-- ARGV[6] score scan: most names read in score order
-- A range of at most ARGV[5] names is read whole and ranked: exact. A larger range
-- is searched by reading the whole index best-first, keeping members with the
-- prefix: exact as soon as `limit` are found. If ARGV[6] names are read first, the
-- rest is filled from the best of the range's first ARGV[5] names and the reply
-- says truncated. So one call reads at most ARGV[5] + ARGV[6] names.
-- Returns {truncated (0/1), member 1, stored score 1, member 2, ...}.
--! include names_common.lua
local limit, range_scan = tonumber(ARGV[4]), tonumber(ARGV[5])

-- The best `limit` of members (best first, ties in name order) as {member, number,
-- stored score}: one ZMSCORE for all of them, then a selection that keeps only the
-- best `limit` (no full sort: limit is small next to the range).
local function ranked(members)
  local best = {}
  if #members == 0 then
    return best
  end
  local scores = redis.call('ZMSCORE', KEYS[2], unpack(members))
  for i, m in ipairs(members) do
    local s = scores[i] or '0'
    local e = {m, tonumber(s), s}
    local n = #best
    if n < limit or e[2] < best[n][2] or (e[2] == best[n][2] and m < best[n][1]) then
      local at = n + 1
      while at > 1 and (e[2] < best[at - 1][2] or (e[2] == best[at - 1][2] and m < best[at - 1][1])) do
        at = at - 1
      end
      table.insert(best, at, e)
      if #best > limit then
        best[#best] = nil
      end
    end
  end
  return best
end

local reply, taken = {0}, {}
local function take(m, s)
  reply[#reply + 1] = m
  reply[#reply + 1] = s
  taken[m] = true
  return #reply > 2 * limit
end

if redis.call('ZLEXCOUNT', KEYS[1], ARGV[1], ARGV[2]) <= range_scan then
  for _, e in ipairs(ranked(redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2]))) do
    if take(e[1], e[3]) then
      break
    end
  end
  return reply
end
local prefix, chunk, read = ARGV[3], 500, 0
while read < tonumber(ARGV[6]) do
  local batch = redis.call('ZRANGE', KEYS[2], read, read + chunk - 1, 'WITHSCORES')
  for i = 1, #batch, 2 do
    if string.sub(batch[i], 1, #prefix) == prefix and take(batch[i], batch[i + 1]) then
      return reply
    end
  end
  if #batch < 2 * chunk then
    return reply  -- read the whole index: exact
  end
  read = read + chunk
end
reply[1] = 1
for _, e in ipairs(ranked(redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, range_scan))) do
  if not taken[e[1]] and take(e[1], e[3]) then
    break
  end
end
return reply
