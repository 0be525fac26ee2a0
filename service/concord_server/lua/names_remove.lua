-- names_remove.lua: remove names (members) from an index.
-- KEYS: see names_common.lua   ARGV[1], ARGV[2]: see names_common.lua
-- ARGV[3...] members
-- Returns how many were there.
--! include names_common.lua
local removed = 0
for i = 3, #ARGV do
  local m = ARGV[i]
  local old = redis.call('ZSCORE', KEYS[2], m) or '0'
  if redis.call('ZREM', KEYS[1], m) == 1 then
    removed = removed + 1
    redis.call('ZREM', KEYS[2], m)
    unlisted(m, old)
  end
end
return removed
