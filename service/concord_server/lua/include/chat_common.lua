-- chat_common.lua: helpers prepended to every chat_*.lua script.
--
-- Every chat script takes the same KEYS (keys.ChatKeys), all under one hash tag:
--   KEYS[1] members  zset    user -> id of the last message that member has seen
--   KEYS[2] msgs     stream  entry id "<message id>-0", fields s (sender), b (body), t (sent ms)
--   KEYS[3] meta     hash    seq (last message id), bytes (bodies kept, in bytes)
-- and starts its ARGV with the same three values:
--   ARGV[1] wake-up channel (shard channel in the same slot), which carries
--             "<id> <sent ms> <sender>\n<body>"  a sent message whose body is within the
--                                    send's bound (the message itself: no read needed)
--             "<id>"                 any other new message (a doorbell: read it)
--             "leave <user>"         the user is no member any more
--           Ids are sequential per chat (meta.seq + 1), so message id - 1 is always the
--           one before it: a subscriber's server delivers a carried message when its
--           stream's cursor is exactly id - 1, and reads otherwise (chat_feeds.py).
--           A sender has no control characters (names are validated), so the first
--           newline ends the header; the body may hold anything.
--   ARGV[2] most messages kept   ARGV[3] most body bytes kept

local function message_id(entry_id)
  return tonumber(string.match(entry_id, '^(%d+)-'))
end

-- The oldest message id still kept, or seq + 1 when none is.
local function first_id(seq)
  local oldest = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
  return oldest and message_id(oldest[1]) or seq + 1
end

local function body_bytes(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'b' then
      return #fields[i + 1]
    end
  end
  return 0
end

-- Deletes the oldest messages while `more` says so; keeps meta.bytes true.
local function drop_oldest(more)
  while true do
    local oldest = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
    if not oldest or not more(message_id(oldest[1])) then
      return
    end
    redis.call('XDEL', KEYS[2], oldest[1])
    redis.call('HINCRBY', KEYS[3], 'bytes', -body_bytes(oldest[2]))
  end
end

-- Messages every member has seen are not needed any more.
local function drop_seen()
  local lowest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
  if lowest then
    local seen = tonumber(lowest)
    drop_oldest(function(id) return id <= seen end)
  end
end

-- Appends a message, enforces retention (never dropping the new one) and publishes it:
-- the whole message when its body has at most carry_bytes bytes, else just its id.
-- Returns its id and the time it was sent.
local function append(sender, body, now_ms, carry_bytes)
  local id = redis.call('HINCRBY', KEYS[3], 'seq', 1)
  redis.call('XADD', KEYS[2], id .. '-0', 's', sender, 'b', body, 't', now_ms)
  local bytes = redis.call('HINCRBY', KEYS[3], 'bytes', #body)
  local max_count, max_bytes = tonumber(ARGV[2]), tonumber(ARGV[3])
  if bytes > max_bytes or redis.call('XLEN', KEYS[2]) > max_count then  -- the common case reads no more
    drop_oldest(function(oldest)
      return oldest < id and (redis.call('XLEN', KEYS[2]) > max_count
        or tonumber(redis.call('HGET', KEYS[3], 'bytes')) > max_bytes)
    end)
  end
  if #body <= carry_bytes then
    redis.call('SPUBLISH', ARGV[1], id .. ' ' .. string.format('%d', now_ms) .. ' ' .. sender .. '\n' .. body)
  else
    redis.call('SPUBLISH', ARGV[1], id)
  end
  return id
end
