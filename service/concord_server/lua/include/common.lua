-- common.lua: helpers for every script (included first).
-- All times come from the Redis server clock (TIME), never the caller's.

local function clock()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return math.floor(us / 1000), us
end

-- Lua's default number formatting loses digits above 1e14; tokens are ~1.8e15.
local function fmt(n)
  return string.format('%.0f', n)
end

-- Calls fn with successive slices of list, each short enough to unpack into one
-- command's arguments (Lua's stack bounds unpack).
local function for_chunks(list, fn)
  for first = 1, #list, 1000 do
    fn({unpack(list, first, math.min(first + 999, #list))})
  end
end
