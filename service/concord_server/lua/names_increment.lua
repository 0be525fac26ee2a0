-- names_increment.lua: add to a name's score.
-- KEYS: see names_common.lua   ARGV[1], ARGV[2]: see names_common.lua
-- ARGV[3] member   ARGV[4] delta
-- Returns false if the index does not hold the name, else minus its new score
-- (the stored form, as a string: Lua numbers would lose digits).
--! include names_common.lua
local m = ARGV[3]
if not redis.call('ZSCORE', KEYS[1], m) then
  return false
end
upgrade()
local old = redis.call('ZSCORE', KEYS[2], m)
local s = redis.call('ZINCRBY', KEYS[2], -tonumber(ARGV[4]), m)
if tonumber(s) == 0 then  -- score 0 is no entry
  redis.call('ZREM', KEYS[2], m)
  s = '0'
end
relist(m, old, s)
mark()
return s
