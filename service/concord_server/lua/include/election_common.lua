-- election_common.lua: helpers for every election_*.lua script (after lock_common.lua).
--
-- An election is a lock whose holder is the leader (keys.ElectionKeys): KEYS[1..5]
-- are a lock's, so candidates queue and are granted by lock_common.lua, and a term
-- is a fencing token. Three more keys, under the same hash tag:
--   KEYS[6] values   hash    queued candidate's lease -> the value it will lead with
--   KEYS[7] history  stream  the changes of leadership, ids "<n>-0", fields
--                            t (term, 0: nobody leads), c (candidate), v (value), ms;
--                            its name is also the shard channel that rings observers
--   KEYS[8] said     hash    n (the last change's number), term (the term it announced)
-- ARGV[1] and ARGV[2] are lock_common.lua's (wake-up channel, fence retention ms);
-- the history and said keys live as long as the fence key.
--
-- Every script that may change the leader ends with announce(), which compares the
-- holder with what the history last said and records the difference: so a grant
-- made anywhere (a release, a withdraw, a poll after a TTL ran out) is recorded
-- once, in order, in the same atomic step that made it.

local KEEP_CHANGES = 1000

local function record(now_ms, term, candidate, value)
  local n = redis.call('HINCRBY', KEYS[8], 'n', 1)
  redis.call('HSET', KEYS[8], 'term', fmt(term))
  redis.call('XADD', KEYS[7], 'MAXLEN', KEEP_CHANGES, n .. '-0', 't', fmt(term), 'c', candidate, 'v', value,
             'ms', now_ms)
  redis.call('PEXPIRE', KEYS[7], ARGV[2])
  redis.call('PEXPIRE', KEYS[8], ARGV[2])
  redis.call('SPUBLISH', KEYS[7], n)
  return n
end

-- Records a change of leader (or that nobody leads) if the history does not say it yet.
-- A new leader's value moves from the queued candidates' values to the holder.
local function announce(now_ms)
  local h = redis.call('HMGET', KEYS[1], 'lease', 'owner', 'fence', 'value')
  local term = tonumber(h[3] or '0')
  if term == tonumber(redis.call('HGET', KEYS[8], 'term') or '0') then
    return
  end
  if not h[1] then
    record(now_ms, 0, '', '')
    return
  end
  local value = h[4]
  if not value then
    value = redis.call('HGET', KEYS[6], h[1]) or ''
    redis.call('HDEL', KEYS[6], h[1])
    redis.call('HSET', KEYS[1], 'value', value)
  end
  record(now_ms, term, h[2], value)
end

-- A leader whose TTL ran out hands over to the next live candidate (or nobody).
local function settle(now_ms, now_us)
  if redis.call('EXISTS', KEYS[1]) == 0 then
    grant_next(now_ms, now_us)
  end
  announce(now_ms)
end

-- Whether the term is the leader's now.
local function leads(term)
  return redis.call('HGET', KEYS[1], 'fence') == term
end
