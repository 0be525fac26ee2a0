-- names_best.lua: the best-scored names in a prefix range, at bounded cost.
-- KEYS: see names_common.lua   ARGV[1], ARGV[2]: see names_common.lua
-- ARGV[3], ARGV[4] the range as ZRANGEBYLEX bounds   ARGV[5] the member prefix ('' = all)
-- ARGV[6] limit   ARGV[7] score scan: most names one call reads
-- Returns {truncated (0/1), member 1, stored score 1, member 2, ...}, best first.
--
-- Order: positive scores (best first), then score 0 in name order, then negative
-- scores; ties in name order. Exact in every case but the one below:
--   - a range of at most RANK_WHOLE names is read whole and ranked;
--   - else the prefix's positive names are read whole when at most TOP_KEPT;
--     else they come from the prefix's list (names_common.lua)
--     when it can answer; else this builds the list, by whichever costs less by
--     estimate: reading the prefix's positive names whole, or reading the scores
--     best first, keeping names with the prefix, until the list is full or the
--     positive scores run out;
--   - when the positive names are fewer than limit, the rest comes from reading the
--     range in name order: names scoring 0 as they come, then the best negative ones
--     once the range is read whole.
-- Reading more than ARGV[7] names stops the search: the positive names found so far
-- (they are the best) are filled up from the best of the range's first RANK_WHOLE
-- names, and the reply says truncated. No list is stored from a cut search.
--! include names_common.lua
upgrade()
local low, high, p = ARGV[3], ARGV[4], ARGV[5]
local limit, score_scan = tonumber(ARGV[6]), tonumber(ARGV[7])
local CHUNK = 500

local function unorder(ordered)  -- the inverse of order(), as a number
  local b = {string.byte(ordered, 1, 8)}
  if b[1] >= 128 then
    b[1] = b[1] - 128
  else
    for i = 1, 8 do
      b[i] = 255 - b[i]
    end
  end
  return struct.unpack('>d', string.char(unpack(b)))
end

local function stored_score(ordered)
  return string.format('%.17g', unorder(ordered))
end

-- Inserts {m, s, v} into t (best first, at most cap long), after any equal score:
-- names arrive in name order, so ties stay in name order. A binary search: a list
-- of TOP_KEPT takes few comparisons a name.
local function insert(t, cap, m, s, v)
  local n = #t
  if n >= cap and v >= t[n][3] then
    return
  end
  local lo, hi = 1, n + 1  -- the first place whose score is above v
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if v < t[mid][3] then
      hi = mid
    else
      lo = mid + 1
    end
  end
  table.insert(t, lo, {m, s, v})
  if n + 1 > cap then
    t[n + 1] = nil
  end
end

-- Reads the range in name order, at most `most` names: the best keep_pos positive
-- names, the first `need` names scoring 0 and the best `need` negative ones.
-- Stops early once positives are not wanted (keep_pos 0) and the zeros fill `need`.
-- Returns them and whether the range was read to its end.
local function walk(keep_pos, need, most)
  local pos, zeros, negs = {}, {}, {}
  local from, read = low, 0
  while read < most do
    local n = math.min(CHUNK, most - read)
    local members = redis.call('ZRANGEBYLEX', KEYS[1], from, high, 'LIMIT', 0, n)
    if #members == 0 then
      return pos, zeros, negs, true
    end
    local scores = redis.call('ZMSCORE', KEYS[2], unpack(members))
    for i, m in ipairs(members) do
      local s = scores[i]
      local v = s and tonumber(s) or 0
      if v < 0 then
        if keep_pos > 0 then
          insert(pos, keep_pos, m, s, v)
        end
      elseif v == 0 then
        if #zeros < need then
          zeros[#zeros + 1] = {m, '0', 0}
        end
      else
        insert(negs, need, m, s, v)
      end
    end
    read = read + #members
    if #members < n then
      return pos, zeros, negs, true
    end
    if keep_pos == 0 and #zeros >= need then
      return pos, zeros, negs, false
    end
    from = '(' .. members[#members]
  end
  return pos, zeros, negs, #redis.call('ZRANGEBYLEX', KEYS[1], from, high, 'LIMIT', 0, 1) == 0
end

local reply, taken = {0}, {}
local function put(list)
  for _, e in ipairs(list) do
    if #reply > 2 * limit then
      return
    end
    if not taken[e[1]] then
      reply[#reply + 1] = e[1]
      reply[#reply + 1] = e[2]
      taken[e[1]] = true
    end
  end
end

-- the reply from the range's first `most` names ranked whole (positives, zeros, negatives)
local function ranked_whole(most)
  local pos, zeros, negs = walk(limit, limit, most)
  put(pos)
  put(zeros)
  put(negs)
  return reply
end

-- positive names known (all of them, or at least limit): the reply, filled up from
-- the range's zeros and negatives when they are fewer than limit.
local function answer(positives)
  put(positives)
  local need = limit - (#reply - 1) / 2
  if need > 0 then
    local _, zeros, negs, whole = walk(0, need, score_scan)
    put(zeros)
    if whole then
      put(negs)
    elseif #zeros < need then
      reply[1] = 1
      put(negs)
    end
  end
  return reply
end

local count = redis.call('ZLEXCOUNT', KEYS[1], low, high)
if count <= RANK_WHOLE then
  return ranked_whole(count)
end

-- The prefix's positive names: read whole when at most TOP_KEPT (no list needed),
-- else from its list when the list can answer: its first `limit` entries, or all of
-- it when it holds fewer than TOP_KEPT (then it holds every positive name).
local listed = p ~= ''
local plo, phi = '[\255' .. p, '[\255' .. p .. '\255'
local positive_count = listed and redis.call('ZLEXCOUNT', KEYS[3], plo, phi)

-- The best `cap` positive names, reading the prefix's positive names whole.
local function read_positives(cap)
  local best, from = {}, plo
  while true do
    local entries = redis.call('ZRANGEBYLEX', KEYS[3], from, phi, 'LIMIT', 0, CHUNK)
    for _, e in ipairs(entries) do
      insert(best, cap, e, nil, struct.unpack('>d', string.sub(e, -8)))
    end
    if #entries < CHUNK then
      break
    end
    from = '(' .. entries[#entries]
  end
  for _, e in ipairs(best) do
    e[1], e[2] = string.sub(e[1], 2, -9), string.format('%.17g', e[3])
  end
  return best
end

if listed and positive_count <= TOP_KEPT then
  return answer(read_positives(limit))
end

if listed and redis.call('ZSCORE', KEYS[3], marker(p)) then
  local lo, hi = list_range(p)
  local entries = redis.call('ZRANGEBYLEX', KEYS[3], lo, hi, 'LIMIT', 0, math.min(limit, TOP_KEPT) + 1)
  local positives = {}
  for _, e in ipairs(entries) do
    if e ~= marker(p) then
      positives[#positives + 1] = {string.sub(e, #p + 11), stored_score(string.sub(e, #p + 3, #p + 10))}
    end
  end
  if #positives >= limit or #positives < TOP_KEPT then
    return answer(positives)
  end
end

-- Build: the best `keep` positive names, exactly, by the cheaper way: reading the
-- prefix's positive names whole (positive_count of them), or the scores best first,
-- keeping names with the prefix, which reads about keep * S / positive_count of the
-- S scored names if they spread evenly.
local keep = listed and math.max(limit, TOP_KEPT) or limit
local positives
if listed and positive_count <= score_scan
    and positive_count * positive_count <= keep * redis.call('ZCARD', KEYS[2]) then
  positives = read_positives(keep)
  answer(positives)
else
  local read, cut, complete = 0, false, false
  positives = {}
  while #positives < keep and not complete do
    if read >= score_scan then
      cut = true
      break
    end
    local batch = redis.call('ZRANGE', KEYS[2], read, read + CHUNK - 1, 'WITHSCORES')
    for i = 1, #batch, 2 do
      if tonumber(batch[i + 1]) >= 0 then
        complete = true
        break
      end
      if string.sub(batch[i], 1, #p) == p then
        positives[#positives + 1] = {batch[i], batch[i + 1]}
        if #positives == keep then
          break
        end
      end
    end
    complete = complete or #batch < 2 * CHUNK
    read = read + CHUNK
  end
  if cut then
    reply[1] = 1
    put(positives)
    return ranked_whole(RANK_WHOLE)
  end
  answer(positives)
end

if listed then  -- the first TOP_KEPT, or fewer: all there are
  local lo, hi = list_range(p)
  redis.call('ZREMRANGEBYLEX', KEYS[3], lo, hi)
  for i = 1, math.min(TOP_KEPT, #positives) do
    redis.call('ZADD', KEYS[3], 0, entry(p, order(positives[i][2]), positives[i][1]))
  end
  redis.call('ZADD', KEYS[3], 0, marker(p))
end
return reply
