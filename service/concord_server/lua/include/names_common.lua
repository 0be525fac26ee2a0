-- names_common.lua: the keys of a name index, and the upkeep of its cached
-- best-score lists, for every names_*.lua script.
--   KEYS[1] lex    zset  every name at score 0, so ZRANGEBYLEX orders them:
--                        member = escaped normalized name .. "\0\0" .. original name
--                        (autocomplete.py builds members; a "\0" in the normalized
--                        name is escaped as "\0\1", so the first "\0\0" ends it)
--   KEYS[2] scores zset  only the names whose score is not 0: member -> minus its
--                        score, so ascending order is best first and ties fall in
--                        name order. A member missing here scores 0.
--   KEYS[3] tops   zset  every entry at score 0, two kinds:
--                        - "\255" .. member .. stored score (8 bytes, a big-endian
--                          double) for each name with a positive score: the positive
--                          names in name order with their scores, so ZLEXCOUNT counts
--                          a prefix's and ZRANGEBYLEX reads them ("\255" starts no
--                          UTF-8 name, so no list entry);
--                        - cached best-score lists. Prefix p's list: entries
--                          p .. "\0\0" .. order(stored score) .. member, best first
--                          under one ZRANGEBYLEX, and the marker p .. "\0\0\255"
--                          (sorts after them) saying the list exists;
--                        - "\255" alone: the format mark (see upgrade()).
--   ARGV[1] RANK_WHOLE   ARGV[2] TOP_KEPT   (each script's first two)
--
-- A list holds names with a positive score only (scores 0 and below are found by
-- names_best.lua in the name range itself), and is built by names_best.lua on the
-- first best-score Suggest that needs it (a prefix more than TOP_KEPT positive
-- names start with), never by a load. Its one invariant: it
-- holds the prefix's TOP_KEPT best positive names, or all of them when it holds
-- fewer than TOP_KEPT. So an unscored name never touches a list, and a write that
-- changes a positive score touches only the lists that exist for the name's
-- prefixes (relist below): it stays exact there or drops the list, which the next
-- read rebuilds.
-- Lua's string '<' goes through strcoll and stops at "\0", so strings are ordered
-- by Redis (ZRANGEBYLEX) or byte by byte (before()), never with '<'.
local RANK_WHOLE, TOP_KEPT = tonumber(ARGV[1]), tonumber(ARGV[2])

-- 8 bytes whose byte order is the numeric order of a stored score.
local function order(stored)
  local s = tonumber(stored)
  if s == 0 then
    s = 0  -- -0 and 0 are one score
  end
  local b = {string.byte(struct.pack('>d', s), 1, 8)}
  if b[1] >= 128 then
    for i = 1, 8 do
      b[i] = 255 - b[i]
    end
  else
    b[1] = b[1] + 128
  end
  return string.char(unpack(b))
end

-- ZRANGEBYLEX bounds of p's list in KEYS[3], its marker included (and not its longer
-- prefixes' lists: they continue p with a byte above "\0\0").
local function list_range(p)
  return '[' .. p .. '\0\0', '[' .. p .. '\0\0\255'
end

local function marker(p)
  return p .. '\0\0\255'
end

local function entry(p, ordered, m)
  return p .. '\0\0' .. ordered .. m
end

-- Whether a sorts before b in byte order, comparing from byte `from` on.
local function before(a, b, from)
  for i = from, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- Stored score -> whether the name is a positive one (listed): minus a positive
-- score is below 0.
local function positive(stored)
  return stored ~= nil and stored ~= false and tonumber(stored) < 0
end

-- The whole-character prefixes of m's normalized name, shortest first.
local function prefixes(m)
  local key = string.sub(m, 1, string.find(m, '\0\0', 1, true) - 1)
  local found = {}
  for l = 1, #key do
    local next_byte = string.byte(key, l + 1)
    -- a character ends at l unless the next byte continues it (UTF-8 10xxxxxx,
    -- or the "\1" of an escaped "\0")
    if string.byte(key, l) ~= 0 and (next_byte == nil or next_byte < 128 or next_byte > 191) then
      found[#found + 1] = string.sub(key, 1, l)
    end
  end
  return found
end

-- p's list after m's entry went from was to now (order() bytes, nil: not positive).
local function relist_at(p, m, was, now)
  local lo, hi = list_range(p)
  local full = redis.call('ZLEXCOUNT', KEYS[3], lo, hi) - 1 >= TOP_KEPT
  local left = was and redis.call('ZREM', KEYS[3], entry(p, was, m)) == 1
  if not full then  -- it holds every positive name: m goes in wherever it ranks
    if now then
      redis.call('ZADD', KEYS[3], 0, entry(p, now, m))
    end
    return
  end
  -- It holds exactly the TOP_KEPT best; the names outside rank below its last one
  -- (and below m's old entry, if m was in it).
  local last = redis.call('ZREVRANGEBYLEX', KEYS[3], '(' .. marker(p), lo, 'LIMIT', 0, 1)[1]
  local e = now and entry(p, now, m)
  if e and ((last and before(e, last, #p + 3)) or (left and before(now, was, 1))) then
    redis.call('ZADD', KEYS[3], 0, e)
    if not left then
      redis.call('ZREM', KEYS[3], last)  -- back to TOP_KEPT: the last goes outside
    end
  elseif left then
    -- m left and does not rank above the rest: the next best outside is unknown.
    redis.call('ZREMRANGEBYLEX', KEYS[3], lo, hi)
  end
end

-- Prefixes known to have no list, theirs or a longer prefix's. Lists only appear in
-- names_best.lua, so what one write script learns here stays true to its end.
local bare = {}

local function positive_entry(m, stored)
  return '\255' .. m .. struct.pack('>d', tonumber(stored))
end

-- Upkeep after m's stored score went from old to new (nil or false: none, i.e. 0):
-- the positive names, and the lists of m's prefixes that exist, walking prefixes
-- shortest first until no longer prefix has a list.
local function relist(m, old, new)
  local was = positive(old) and order(old) or nil
  local now = positive(new) and order(new) or nil
  if was == now then
    return
  end
  if was then
    redis.call('ZREM', KEYS[3], positive_entry(m, old))
  end
  if now then
    redis.call('ZADD', KEYS[3], 0, positive_entry(m, new))
  end
  for _, p in ipairs(prefixes(m)) do
    if bare[p] or #redis.call('ZRANGEBYLEX', KEYS[3], '[' .. p, '[' .. p .. '\255', 'LIMIT', 0, 1) == 0 then
      bare[p] = true
      return
    end
    if redis.call('ZSCORE', KEYS[3], marker(p)) then
      relist_at(p, m, was, now)
    end
  end
end

-- The format mark in KEYS[3] says this index is kept as above. An index written by
-- the version before (a score entry for every name, 0 included; no positive-name
-- entries; lists without markers) is converted in place, once, by the first script
-- that finds its scores without the mark: O(S log N) for S score entries, in that
-- one call. Converting an index already kept as above changes nothing but dropping
-- its lists, so a mark lost with KEYS[3] costs a rebuild, never a wrong answer.
local function upgrade()
  if redis.call('ZSCORE', KEYS[3], '\255') or redis.call('EXISTS', KEYS[2]) == 0 then
    return
  end
  redis.call('ZREMRANGEBYLEX', KEYS[3], '-', '(\255')  -- lists of the old kind
  local from = 0
  while true do
    local batch = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(0', 'WITHSCORES', 'LIMIT', from, 1000)
    for i = 1, #batch, 2 do
      redis.call('ZADD', KEYS[3], 0, positive_entry(batch[i], batch[i + 1]))
    end
    if #batch < 2000 then
      break
    end
    from = from + 1000
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], 0, 0)
  redis.call('ZADD', KEYS[3], 0, '\255')
end

-- After writing a score: the mark, so upgrade() leaves this index alone.
local function mark()
  redis.call('ZADD', KEYS[3], 0, '\255')
end
