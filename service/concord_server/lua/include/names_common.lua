-- names_common.lua: the keys of a name index and the upkeep of its best-score
-- lists, for every names_*.lua script.
--   KEYS[1] lex    zset  every member at score 0, so ZRANGEBYLEX orders them:
--                        member = escaped normalized name .. "\0\0" .. original name
--                        (autocomplete.py builds members; a "\0" in the normalized
--                        name is escaped as "\0\1", so the first "\0\0" ends it)
--   KEYS[2] scores zset  member -> minus its score, so ascending order is best first
--                        and ties fall in name order
--   KEYS[3] tops   zset  every entry at score 0: prefix .. "\0\0" .. order(stored
--                        score) .. member, so one ZRANGEBYLEX lists a prefix's best
--                        names best first. Kept for every whole-character prefix
--                        that more than RANK_WHOLE names start with.
--   ARGV[1] RANK_WHOLE   ARGV[2] TOP_KEPT (<= RANK_WHOLE)   (each script's first two)
--
-- The one invariant of a prefix's list (at most TOP_KEPT entries): no name outside
-- it ranks above a name in it. So the list's first `limit` entries are the
-- prefix's best names whenever it holds `limit` of them. Writes keep the invariant
-- cheaply: a removed or demoted name leaves its lists (they shrink); a new or
-- promoted name joins a list only if it ranks above the list's last entry. A list
-- is built whole (ranking RANK_WHOLE + 1 names) when its prefix's count crosses
-- RANK_WHOLE, dropped when the count falls back, and rebuilt by names_best.lua
-- when reads have shrunk it below what a Suggest asks for.
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

local function lex_count(p)
  return redis.call('ZLEXCOUNT', KEYS[1], '[' .. p, '[' .. p .. '\255')
end

-- ZRANGEBYLEX bounds of a prefix's list in KEYS[3] (not its longer prefixes' lists).
local function list_range(p)
  return '[' .. p .. '\0\0', '[' .. p .. '\0\0\255'
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

-- The best n of members (which arrive in name order) as {member, stored score},
-- best first, ties in name order: one ZMSCORE, then an insertion that keeps the
-- best n (members arrive in name order, so an equal score stays behind).
local function ranked(members, n)
  local best = {}
  if #members == 0 then
    return best
  end
  local scores = redis.call('ZMSCORE', KEYS[2], unpack(members))
  for i, m in ipairs(members) do
    local s = scores[i] or '0'
    local v = tonumber(s)
    local last = #best
    if last < n or v < best[last][3] then
      local at = last + 1
      while at > 1 and v < best[at - 1][3] do
        at = at - 1
      end
      table.insert(best, at, {m, s, v})
      if #best > n then
        best[#best] = nil
      end
    end
  end
  return best
end

-- Builds p's list from its whole range (at most RANK_WHOLE + 1 names when called
-- on a crossing).
local function build_list(p, members)
  local lo, hi = list_range(p)
  redis.call('ZREMRANGEBYLEX', KEYS[3], lo, hi)
  for _, e in ipairs(ranked(members, TOP_KEPT)) do
    redis.call('ZADD', KEYS[3], 0, entry(p, order(e[2]), e[1]))
  end
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

-- Upkeep after m was added (old = nil) or its stored score went from old to s:
-- for each prefix with a list, m joins it if it ranks above the list's last entry.
-- A list exists exactly while its prefix has more than RANK_WHOLE names, so only a
-- missing list needs the count: to stop, or to build the list on the crossing.
-- What one script call has learnt is kept, so a batch of names reads each list's
-- last entry and each small prefix's count once: the counts stay exact by counting
-- the names the call adds (a walk that reached a prefix once reaches it for every
-- later name sharing it, since lists do not go while names are only added).
local lasts, smalls = {}, {}

-- One prefix's part of listed(); returns true when longer prefixes have no list.
local function listed_at(p, m, old, ordered, was)
  local small = smalls[p]
  if small then
    if old ~= nil then
      return true
    end
    smalls[p] = small + 1
    if small + 1 <= RANK_WHOLE then
      return true
    end
    smalls[p] = nil  -- the crossing: this name makes RANK_WHOLE + 1
    build_list(p, redis.call('ZRANGEBYLEX', KEYS[1], '[' .. p, '[' .. p .. '\255'))
    return false
  end
  local lo, hi = list_range(p)
  if was and redis.call('ZREM', KEYS[3], entry(p, was, m)) == 1 then
    lasts[p] = nil
  end
  local last = lasts[p] or redis.call('ZREVRANGEBYLEX', KEYS[3], hi, lo, 'LIMIT', 0, 1)[1]
  if last == nil then
    local count = lex_count(p)
    if count <= RANK_WHOLE then
      smalls[p] = count
      return true
    end
    if old == nil and count == RANK_WHOLE + 1 then
      build_list(p, redis.call('ZRANGEBYLEX', KEYS[1], '[' .. p, '[' .. p .. '\255'))
    end  -- else emptied by removals: names_best.lua rebuilds it when read
    return false
  end
  lasts[p] = last
  local e = entry(p, ordered, m)
  if before(e, last, #p + 3) then
    redis.call('ZADD', KEYS[3], 0, e)
    if redis.call('ZLEXCOUNT', KEYS[3], lo, hi) > TOP_KEPT then
      redis.call('ZREM', KEYS[3], last)
      lasts[p] = nil
    end
  end
  return false
end

local function listed(m, old, s)
  local ordered, was = order(s), old and order(old)
  for _, p in ipairs(prefixes(m)) do
    if listed_at(p, m, old, ordered, was) then
      return
    end
  end
end

-- Upkeep after m (stored score old) was removed: it leaves its lists, and the
-- lists of prefixes now matched by RANK_WHOLE names or fewer go.
local function unlisted(m, old)
  local was = order(old)
  for _, p in ipairs(prefixes(m)) do
    if lex_count(p) <= RANK_WHOLE then  -- and so every longer prefix
      redis.call('ZREMRANGEBYLEX', KEYS[3], '[' .. p, '[' .. p .. '\255')
      return
    end
    redis.call('ZREM', KEYS[3], entry(p, was, m))
  end
end
