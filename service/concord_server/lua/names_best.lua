-- names_best.lua: the best-scored names in a prefix range, at bounded cost.
-- KEYS: see names_common.lua   ARGV[1], ARGV[2]: see names_common.lua
-- ARGV[3], ARGV[4] the range as ZRANGEBYLEX bounds   ARGV[5] the member prefix ('' = all)
-- ARGV[6] limit   ARGV[7] score scan: most names read in score order
-- Exact in the usual cases, each O(log N + limit) or O(RANK_WHOLE):
--   - a range of at most RANK_WHOLE names is read whole and ranked;
--   - a larger one is answered from its prefix's list (names_common.lua) when
--     limit <= TOP_KEPT and the list holds `limit` names.
-- Otherwise (a list shrunk by removals, limit > TOP_KEPT, or the empty prefix) the
-- whole index is read best-first, keeping names with the prefix: exact as soon as
-- enough are found, which also refills the list. If ARGV[7] names are read first,
-- the rest is filled from the best of the range's first RANK_WHOLE names and the
-- reply says truncated.
-- Returns {truncated (0/1), member 1, stored score 1, member 2, ...}.
--! include names_common.lua
local low, high, p = ARGV[3], ARGV[4], ARGV[5]
local limit, score_scan = tonumber(ARGV[6]), tonumber(ARGV[7])

local function stored_score(ordered)  -- the inverse of order()
  local b = {string.byte(ordered, 1, 8)}
  if b[1] >= 128 then
    b[1] = b[1] - 128
  else
    for i = 1, 8 do
      b[i] = 255 - b[i]
    end
  end
  return string.format('%.17g', struct.unpack('>d', string.char(unpack(b))))
end

local reply, taken = {0}, {}
local function put(m, s)
  reply[#reply + 1] = m
  reply[#reply + 1] = s
  taken[m] = true
end

if redis.call('ZLEXCOUNT', KEYS[1], low, high) <= RANK_WHOLE then
  for _, e in ipairs(ranked(redis.call('ZRANGEBYLEX', KEYS[1], low, high), limit)) do
    put(e[1], e[2])
  end
  return reply
end

local listed = p ~= '' and limit <= TOP_KEPT
if listed then
  local lo, hi = list_range(p)
  local entries = redis.call('ZRANGEBYLEX', KEYS[3], lo, hi, 'LIMIT', 0, limit)
  if #entries == limit then
    for _, e in ipairs(entries) do
      put(string.sub(e, #p + 11), stored_score(string.sub(e, #p + 3, #p + 10)))
    end
    return reply
  end
end

-- Best-first through the whole index: the first names found with the prefix are
-- its best, whenever the search stops.
local want, found, read, chunk, whole = limit, {}, 0, 500, false
if listed then
  want = TOP_KEPT
end
while #found < want and read < score_scan do
  local batch = redis.call('ZRANGE', KEYS[2], read, read + chunk - 1, 'WITHSCORES')
  for i = 1, #batch, 2 do
    if string.sub(batch[i], 1, #p) == p then
      found[#found + 1] = {batch[i], batch[i + 1]}
      if #found == want then
        break
      end
    end
  end
  whole = #batch < 2 * chunk
  if whole then
    break
  end
  read = read + chunk
end
if listed then
  local lo, hi = list_range(p)
  redis.call('ZREMRANGEBYLEX', KEYS[3], lo, hi)
  for _, e in ipairs(found) do
    redis.call('ZADD', KEYS[3], 0, entry(p, order(e[2]), e[1]))
  end
end
for i = 1, math.min(limit, #found) do
  put(found[i][1], found[i][2])
end
if #found >= limit or whole then
  return reply
end
reply[1] = 1
for _, e in ipairs(ranked(redis.call('ZRANGEBYLEX', KEYS[1], low, high, 'LIMIT', 0, RANK_WHOLE), limit)) do
  if #reply > 2 * limit then
    break
  end
  if not taken[e[1]] then
    put(e[1], e[2])
  end
end
return reply
