-- names_increment.lua: add to a name's score.
-- KEYS: see names_common.lua
-- ARGV[1] member   ARGV[2] delta
-- Returns false if the index does not hold the name, else minus its new score
-- (the stored form, as a string: Lua numbers would lose digits).
--! include names_common.lua
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return false
end
return redis.call('ZINCRBY', KEYS[2], -tonumber(ARGV[2]), ARGV[1])
