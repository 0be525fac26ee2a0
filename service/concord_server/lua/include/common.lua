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
