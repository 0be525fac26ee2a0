-- queue_search.lua: one page of a search over the queue's tasks, after the clock's changes.
-- The tasks are walked set by set (1 ready: the `since` set, grouped tasks too; 2 delayed;
-- 3 leased; 4 dead; 5 done: retained succeeded and cancelled), each in score order, ties
-- by id. The position after the last task looked at (set, score, id) is the next page's
-- cursor: it is found again by ZRANK while that task is still there with that score,
-- else by its score and id (a binary search among equal scores), so a task that stays
-- put is looked at exactly once whatever else comes and goes.
-- KEYS: see queue_common.lua
-- ARGV[7] the sets to walk, in order: a string of set numbers ('12345': all)
-- ARGV[8] done: 'succeeded' or 'cancelled' to keep only that state from set 5 ('' both)
-- ARGV[9] cursor set ('' or 0: from the start of the first set)   ARGV[10] cursor score
-- ARGV[11] cursor id (12 hex digits)
-- ARGV[12] task id: look up only this task ('' walks the sets)
-- ARGV[13] type (exact, '' any)   ARGV[14] type prefix ('' any)
-- ARGV[15] error text, lower case: the last error, its ASCII letters lowered, must hold it
-- ARGV[16] payload bytes the payload must hold ('' any)
-- ARGV[17] most matches   ARGV[18] most tasks looked at   ARGV[19] most payload and error
--          bytes read (the task that passes it is the last looked at)
-- ARGV[20] a page's reply bytes: the page ends before the match that would pass them
--          (task_bytes; the first match always comes)
-- Returns {examined, paused 0/1, next set (0: the search is done), next score, next id,
--   match 1 (see task_reply), match 2, ...}.
--! include common.lua
--! include queue_common.lua
local now_ms = clock()
announce(sweep(now_ms))
local SETS = {KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[8]}
local CHUNK = 100
local done_state = ARGV[8]
local ttype, prefix, err_text, payload_text = ARGV[13], ARGV[14], ARGV[15], ARGV[16]
local most, budget, byte_budget, reply_budget = tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[19]),
  tonumber(ARGV[20])
local is_paused = paused() and 1 or 0
local examined, bytes_read, reply_bytes = 0, 0, 0
local matches = {}

-- The task hash fields the filters read, per set (set 5 may also need the state), and
-- where each is in HMGET's reply: one command a task whatever the filters. A live
-- task always has type and state, so a nil among them means its hash is gone (a
-- retained task whose hash expired before sweep trimmed its entry); a search with no
-- field filter reads the state for that alone, one by payload only its payload.
local function layout(with_state)
  local names, at = {}, {}
  local function add(name)
    names[#names + 1] = name
    at[name] = #names
  end
  if ttype ~= '' or prefix ~= '' then
    add('type')
  end
  if err_text ~= '' then
    add('err')
  end
  if with_state or (#names == 0 and payload_text == '') then
    add('state')
  end
  return {names = names, at = at}
end
local plain = layout(false)
local LAYOUTS = {plain, plain, plain, plain, layout(done_state ~= '')}

-- Whether the task (found in set s) passes every filter; counts the bytes it read.
local function matches_filters(id, s)
  local k = task_key(id)
  local l = LAYOUTS[s]
  if #l.names > 0 then
    local f = redis.call('HMGET', k, unpack(l.names))
    for i = 1, #l.names do
      if not f[i] then
        return false  -- gone, or no error to match
      end
    end
    local at = l.at
    if at.state and s == 5 and done_state ~= '' and f[at.state] ~= done_state then
      return false
    end
    if ttype ~= '' and f[at.type] ~= ttype then
      return false
    end
    if prefix ~= '' and string.sub(f[at.type], 1, #prefix) ~= prefix then
      return false
    end
    if err_text ~= '' then
      local err = f[at.err]
      bytes_read = bytes_read + #err
      if not string.find(string.lower(err), err_text, 1, true) then
        return false
      end
    end
  end
  if payload_text ~= '' then
    local payload = redis.call('HGET', k, 'payload')
    if not payload then
      return false  -- gone
    end
    bytes_read = bytes_read + #payload
    if not string.find(payload, payload_text, 1, true) then
      return false
    end
  end
  return true
end

-- Every set's scores are whole ms, written the one way page tokens allow.
local function reply(next_set, score, id)
  local r = {examined, is_paused, next_set, score and fmt(tonumber(score)) or '', id or ''}
  for _, m in ipairs(matches) do
    r[#r + 1] = m
  end
  return r
end

-- One task id: no walk.
if ARGV[12] ~= '' then
  local id = ARGV[12]
  local state = redis.call('HGET', task_key(id), 'state')
  local s = ({ready = 1, delayed = 2, leased = 3, dead = 4, succeeded = 5, cancelled = 5})[state or '']
  if s and string.find(ARGV[7], tostring(s), 1, true) then
    examined = 1
    if matches_filters(id, s) then
      matches[1] = task_reply(id)
    end
  end
  return reply(0)
end

-- The rank in key of the first entry after (score, id).
local function start_rank(key, score, id)
  local s = redis.call('ZSCORE', key, id)
  if s and tonumber(s) == tonumber(score) then
    return redis.call('ZRANK', key, id) + 1
  end
  -- That task left the set or moved in it: the entries scored `score` are ranks
  -- [lo, hi), in id order (ids are 12 hex digits: compared as numbers, not by locale).
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', key, '-inf', score)
  local after = tonumber(id, 16)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call('ZRANGE', key, mid, mid)[1], 16) <= after then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return lo
end

local order = ARGV[7]
local from = tonumber(ARGV[9]) or 0
local prev = nil  -- {set, score, id} of the last task looked at
for i = 1, #order do
  local s = tonumber(string.sub(order, i, i))
  if s >= from then
    local key = SETS[s]
    local rank = 0
    if s == from then
      rank = start_rank(key, ARGV[10], ARGV[11])
    end
    while true do
      local entries = redis.call('ZRANGE', key, rank, rank + math.min(CHUNK, budget - examined) - 1, 'WITHSCORES')
      if #entries == 0 then
        break
      end
      for j = 1, #entries, 2 do
        local id, score = entries[j], entries[j + 1]
        if matches_filters(id, s) then
          local size = task_bytes(id)
          if #matches > 0 and reply_bytes + size > reply_budget then
            -- This match does not fit: the next page starts with it (looked at again).
            return reply(prev[1], prev[2], prev[3])
          end
          reply_bytes = reply_bytes + size
          matches[#matches + 1] = task_reply(id)
        end
        examined = examined + 1
        prev = {s, score, id}
        if #matches >= most or examined >= budget or bytes_read >= byte_budget then
          return reply(s, score, id)
        end
      end
      rank = rank + #entries / 2
    end
  end
end
return reply(0)
